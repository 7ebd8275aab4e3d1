"""The SRE report: offline plotly HTML pages (an overview and one page per group) read from the lake's
gold and what-if tables, with every string from Kafka escaped."""
