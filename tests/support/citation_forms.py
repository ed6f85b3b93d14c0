"""Ways an answer can write a citation, as an attacker would try them. `{id}` is a publication id without its
`pub_` prefix, `{src}` a source id; each form names version 1 of the publication, or version 9 of the
source at `page:1`.

CITED forms are shown to a reader as a citation link, so the claim check must count them. SHOWN_AS_TEXT
forms are not links on the page (code, a document's own link, a split or look-alike id, a section about
what was not read, a source named without a locator), so the check must count nothing there either.
"""

from __future__ import annotations

CITED = {
    "plain": "pub_{id}@1 found it.",
    "backslash-escaped underscore": "pub\\_{id}@1 found it.",
    "decimal reference": "pub&#95;{id}@1 found it.",
    "hex reference": "pub&#x5f;{id}@1 found it.",
    "named reference": "pub&lowbar;{id}@1 found it.",
    "named at sign": "pub_{id}&commat;1 found it.",
    "decimal at sign": "pub_{id}&#64;1 found it.",
    "backslash-escaped at sign": "pub_{id}\\@1 found it.",
    "reference for the first letter": "&#112;ub_{id}@1 found it.",
    "reference for the version": "pub_{id}@&#49; found it.",
    "emphasised whole": "*pub_{id}@1* found it.",
    "in brackets": "[pub_{id}@1] found it.",
    "in a quote": "> pub_{id}@1 found it.",
    "in a heading": "# What pub_{id}@1 found",
    "in an underlined heading": "What pub_{id}@1 found\n---",
    "in an HTML block shown as text": "<div>\npub_{id}@1 found it.\n</div>",
    "source, referenced space": "{src}@v9&#32;page:1 found it.",
    "source, escaped at sign": "{src}\\@v9 page:1 found it.",
    "source, referenced colon": "{src}@v9 page&#58;1 found it.",
}

SHOWN_AS_TEXT = {
    "code span": "`pub_{id}@1` found it.",
    "fenced code": "```\npub_{id}@1 found it.\n```",
    "indented code": "    pub_{id}@1 found it.",
    "text of a link elsewhere": "[pub_{id}@1](https://example.com/) found it.",
    "link into the workbench": "[It was found](/publications/pub_{id}/versions/1).",
    "relative link": "[It was found](../../pub_{id}/versions/1).",
    "scheme-relative path": "[It was found](https:/publications/pub_{id}/versions/1).",
    "reference link": "[It was found][r].\n\n[r]: /publications/pub_{id}/versions/1",
    "e-mail autolink": "<pub_{id}@1> found it.",
    "image alt": "![pub_{id}@1](x.png) found it.",
    "split by emphasis": "pub_*{id}*@1 found it.",
    "zero-width space": "pub_\u200b{id}@1 found it.",
    "referenced zero-width space": "pub_&#8203;{id}@1 found it.",
    "soft hyphen": "pub_&shy;{id}@1 found it.",
    "fullwidth at sign": "pub_{id}\uff201 found it.",
    "fullwidth underscore": "pub\uff3f{id}@1 found it.",
    "arabic-indic digit": "pub_{id}@\u0661 found it.",
    "hard break": "pub_{id}\\\n@1 found it.",
    "source without a locator": "{src}@v9 found it.",
    "section not read": "## Sources not read\n\n- pub_{id}@1 found it.",
    "referenced heading not read": "# Not&#32;read\n\npub_{id}@1 found it.",
    "underlined heading not read": "Not read\n===\n\npub_{id}@1 found it.",
}


def written(form: str, pub_id: str, source_id: str = "announcement") -> str:
    return form.format(id=pub_id.removeprefix("pub_"), src=source_id)


def shown_as_text(pub_id: str, source_id: str = "announcement") -> str:
    """Every SHOWN_AS_TEXT form in one answer; the sections not read come last (each runs to the end)."""
    return "\n\n".join(written(form, pub_id, source_id) for form in SHOWN_AS_TEXT.values()) + "\n"
