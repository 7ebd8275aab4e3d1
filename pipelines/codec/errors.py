"""The one exception type of the codec."""


class CodecError(ValueError):
    """A record that cannot be decoded or encoded; the message says what and where."""
