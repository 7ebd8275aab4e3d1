"""File names and escaping of untrusted ids (no Spark, no browser)."""
from __future__ import annotations

import re

from dashboards.safe import group_hash, page_name, plot_text, text


def test_page_names_are_plain_and_unique():
    ids = ["orders", "Orders", "orders/", "../../etc/passwd", "a b", "a_b", "\u00e9v\u00e9nements", "",
           "<img src=x onerror=alert(1)>", "x" * 500, "con", ".hidden"]
    names = {page_name("c", g) for g in ids}
    assert len(names) == len(ids)
    for n in names:
        assert re.fullmatch(r"[a-z0-9][a-z0-9._-]*-[0-9a-f]{16}\.html", n), n
        assert len(n) <= 64
    # The same id in two clusters is two pages.
    assert page_name("prod", "orders") != page_name("staging", "orders")
    assert re.fullmatch(r"[0-9a-f]{64}", group_hash("c", "\u00e9"))


def test_escaping():
    assert text('<img src=x onerror="alert(1)">') == "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"
    assert text("it's") == "it&#x27;s"
    assert plot_text("<b>m</b>") == "&lt;b&gt;m&lt;/b&gt;"
    # plotly would show &quot; as written: quotes stay (no tag can form without a `<`).
    assert plot_text('"><script>it\'s') == "\"&gt;&lt;script&gt;it's"
    assert plot_text("a\u202eb") == "a\\u202eb"
    assert text(None) == ""


def test_invisible_characters_are_spelled_out_as_on_the_terminal():
    # A right-to-left override would show this id as "invoiceexe.png"; NUL, ESC, a zero-width
    # space and a lone surrogate would hide or disguise parts of an id.
    assert text("invoice\u202egnp.exe") == "invoice\\u202egnp.exe"
    assert text("a\x00b\x1b[31m") == "a\\x00b\\x1b[31m"
    assert text("orders\u200b") == "orders\\u200b"
    assert text("lone \ud800") == "lone \\ud800"
    # A backslash is doubled, so an id that spells an escape itself is told apart.
    assert text("lit\\u202e") == "lit\\\\u202e"
    assert text("\u00e9v\u00e9nements \U0001f600 <b>") == "\u00e9v\u00e9nements \U0001f600 &lt;b&gt;"


def test_members_are_named_by_their_client_id_where_the_member_id_does_not_say_it():
    from dashboards.figures import member_label

    # Classic: the coordinator builds the member id from the client id.
    assert member_label("consumer-g-1-5b1f0c7e-3d0a-4c52-9d59-2f8e7c1a9b10", "consumer-g-1") == \
        "consumer-g-1-5b1f0c7e-3d0a-4c52-9d59-2f8e7c1a9b10"
    # KIP-848: the member id is a UUID the client made up; two members of one client id differ.
    a, b = member_label("Jq2xv0bWTtG7y8x1QpZ4aA", "orders-app"), member_label("k9N0Pp2QRsy3e4f5G6h7iA", "orders-app")
    assert a == "orders-app (Jq2xv0bW…)" and a != b
    assert member_label("Jq2xv0bWTtG7y8x1QpZ4aA", None) == "Jq2xv0bWTtG7y8x1QpZ4aA"
