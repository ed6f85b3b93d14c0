-- Language-aware full-text search, and passages read by OCR.
--
-- Each passage stores the text search configuration of its detected language (`lang`, chosen by the
-- parser: english, russian, arabic, ... or simple) and is indexed with it: stems of that language, its
-- stopwords left out. A query word is looked up as its stem in every configuration of its script (and
-- as its exact form), so it meets a passage's stem whatever language the passage was detected as: the
-- same stemmer applied to the same word gives the same lexeme. Chinese, Japanese and Korean are
-- written without spaces between words: each of their characters is indexed as a word, and a query
-- word in those scripts becomes a phrase of characters (dossier_search_text inserts the spaces).
--
-- Rows that exist already were indexed with `english` before; they keep it, so everything that was
-- found before is found after. New rows always name their language.

CREATE FUNCTION dossier_search_text(t text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT regexp_replace(t, '([\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff])', ' \1 ', 'g') $$;

-- `lang` is text (asyncpg's binary COPY has no encoder for regconfig); the service writes only names of
-- built-in configurations, so the cast always gives the same answer and the function is declared
-- immutable, as a generated column needs.
CREATE FUNCTION dossier_tsv(lang text, t text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT to_tsvector(lang::regconfig, dossier_search_text(t)) $$;

ALTER TABLE evidence ADD COLUMN lang text NOT NULL DEFAULT 'english';
ALTER TABLE evidence ALTER COLUMN lang SET DEFAULT 'simple';
ALTER TABLE evidence ADD COLUMN ocr boolean NOT NULL DEFAULT false;

DROP INDEX evidence_tsv;
ALTER TABLE evidence DROP COLUMN tsv;
ALTER TABLE evidence ADD COLUMN tsv tsvector GENERATED ALWAYS AS (dossier_tsv(lang, text)) STORED;
CREATE INDEX evidence_tsv ON evidence USING gin (tsv);
