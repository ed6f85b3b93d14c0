"""HTML is recognised from its bytes, whatever type the sender declared."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.gateway.sniff import is_html_upload, looks_like_html


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
        b"\xff\xfe<\x00h\x00t\x00m\x00l\x00",  # UTF-16 with NULs
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
