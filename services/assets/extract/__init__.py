"""Extraction of passages with locators: `base` (what every format shares), one module per format, and
`dispatch` (a file through its kind's extractor). Runs only inside the confined parser process."""
