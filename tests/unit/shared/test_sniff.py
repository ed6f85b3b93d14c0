"""One HTML sniffer for the gateway and the assets service: HTML is recognised from its bytes alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.assets.kinds import sniff
from shared.sniff import is_html_upload, looks_like_html


@pytest.mark.parametrize(
    "head",
    [
        b"<!DOCTYPE html><html></html>",
        b"\xef\xbb\xbf  \n<!doctype HTML>",
        b"<html lang='en'>",
        b"\t<HEAD>",
        b"<p>a paragraph</p>",
        b"<!-- generated -->",
        b"<div\nclass='x'>",
        b"<table>",
        b"<br/>",
        b"<meta charset='utf-8'>",
        "\ufeff<!DOCTYPE html><p>UTF-16</p>".encode("utf-16-le"),
        "\ufeff<html><body>big-endian</body>".encode("utf-16-be"),
        "\ufeff<html><p>UTF-32</p>".encode("utf-32-le"),
        "\ufeff<html><p>UTF-32</p>".encode("utf-32-be"),
        b"<?xml version='1.0' encoding='utf-8'?>\n<!-- filed -->\n<!DOCTYPE html PUBLIC '-//W3C//DTD XHTML 1.0//EN'>",
        b"<?xml version='1.0'?><html xmlns='http://www.w3.org/1999/xhtml'>",
    ],
)
def test_html_is_recognised(head: bytes) -> None:
    assert looks_like_html(head)


@pytest.mark.parametrize(
    "head",
    [
        b"%PDF-1.7\n",
        b"PK\x03\x04 docx",
        b"plain words <html> later",
        b"<?xml version='1.0'?><svg/>",
        b"<pre>",  # not a sniffable start tag: `<p` must be followed by a tag end
        b"<\x00h\x00t\x00m\x00l\x00>\x00",  # UTF-16 without its mark: NULs, so binary
        "\ufeff<html>\x00".encode("utf-16-le"),  # a NUL character after decoding
        b"<svg><script>alert(1)</script></svg>",
        b"",
        b"<html\x00",
    ],
)
def test_other_bytes_are_not_html(head: bytes) -> None:
    assert not looks_like_html(head)


def test_declared_type_must_allow_html_and_the_bytes_must_agree(tmp_path: Path) -> None:
    html = tmp_path / "a.html"
    html.write_bytes(b"<!doctype html><p>x</p>")
    pdf = tmp_path / "a.pdf"
    pdf.write_bytes(b"%PDF-1.4 ...")
    assert is_html_upload(html, "text/html; charset=utf-8")
    assert is_html_upload(html, "application/octet-stream")
    assert not is_html_upload(html, "application/pdf")
    assert not is_html_upload(pdf, "text/html")


@pytest.mark.parametrize(
    "head",
    [
        b"<!-- generated --><p>x</p>",
        b"<br/>line",
        b"<meta charset='utf-8'><title>t</title>",
        "<html><p>x</p>".encode("utf-16"),  # the codec writes its own mark
        b"<?xml version='1.0'?>\n<html><body>x</body></html>",
    ],
)
def test_the_gateway_and_the_assets_service_agree(tmp_path: Path, head: bytes) -> None:
    path = tmp_path / "upload"
    path.write_bytes(head)
    assert is_html_upload(path, "text/html")
    assert sniff(path, max_zip_entries=100) == "html"
