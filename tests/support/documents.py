"""Documents generated for tests (nothing binary is checked in)."""

from __future__ import annotations

import pymupdf


def pdf(pages: list[str]) -> bytes:
    doc = pymupdf.open()
    for text in pages:
        page = doc.new_page()
        page.insert_textbox(pymupdf.Rect(50, 50, 550, 800), text, fontsize=11)
    data = doc.tobytes()
    doc.close()
    return bytes(data)


ANNOUNCEMENT = [
    "Fund X announcement, 20 November 2026. The board introduces redemption gates of 10 percent per quarter.",
    "Liquidity update. Daily redemptions are suspended until the illiquid real estate holdings are sold.",
]
