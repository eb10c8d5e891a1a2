/* An upper bound of the words of an HTML page's whole text (resiliparse's, counted as
 * tokenmill.crawl.extract._word_count counts them), read off the page's source without parsing
 * it: every word of the text lies in the source's character data (text outside tags, comments
 * and declarations; raw text elements' contents), between the same separators or more, and the
 * extractor adds one token per list item. Tags are tokenized as the HTML standard does (quoted
 * attribute values, comments to "-->"), so none ends later than the parser's: where the two
 * disagree, this one reads more text, never less. A character reference may stand for a
 * separator or for a character of a script written without spaces: each ends a word here and
 * counts as two such characters. */

#include <stdint.h>
#include <string.h>

#include "../text/utf8.h"

static int is_ascii_alpha(uint8_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

static int is_tag_space(uint8_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

/* Python's str.isspace() */
static int is_space(int32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* extract._UNSPACED: Thai, Lao, Myanmar, Khmer, kana, Han */
static int is_unspaced(int32_t c) {
    return (c >= 0x0E00 && c <= 0x0EFF) || (c >= 0x1000 && c <= 0x109F) ||
           (c >= 0x1780 && c <= 0x17FF) || (c >= 0x3040 && c <= 0x30FF) ||
           (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x4E00 && c <= 0x9FFF) ||
           (c >= 0xF900 && c <= 0xFAFF);
}

typedef struct {
    int64_t words, unspaced, references, items;
    int64_t cdata_counted; /* CDATA sections' text is counted up to here */
    int in_word;
} Counts;

enum { LETTER, SPACE, STARTS_WORD, ENDS_WORD };

/* Each ASCII byte's part in a word: a reference ("&"), or markup the parser may see ("<"),
 * starts one; ">" ends one. */
static uint8_t ascii_parts[128];

static void init_ascii_parts(void) {
    for (int b = 0; b < 128; b++) ascii_parts[b] = is_space(b) ? SPACE : LETTER;
    ascii_parts['&'] = ascii_parts['<'] = STARTS_WORD;
    ascii_parts['>'] = ENDS_WORD;
}

/* The character data data[start, end) counted into *counts. */
static void count_text(const uint8_t *data, int64_t start, int64_t end, Counts *counts) {
    int64_t i = start;
    while (i < end) {
        uint8_t b = data[i];
        if (b < 0x80) {
            switch (ascii_parts[b]) {
            case LETTER:
                counts->words += !counts->in_word;
                counts->in_word = 1;
                i++;
                while (i < end && data[i] < 0x80 && ascii_parts[data[i]] == LETTER) i++;
                continue;
            case SPACE:
                counts->in_word = 0;
                break;
            case STARTS_WORD:
                counts->references += b == '&';
                counts->words++;
                counts->in_word = 1;
                break;
            case ENDS_WORD:
                counts->words += !counts->in_word;
                counts->in_word = 0;
                break;
            }
            i++;
            continue;
        }
        int size = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
        int32_t c = 0xFFFD; /* a sequence cut off at the end: a character of a word */
        if (i + size <= end)
            c = code_point_at(data, i, &size);
        else
            size = 1;
        if (is_space(c)) {
            counts->in_word = 0;
        } else {
            counts->words += !counts->in_word;
            counts->in_word = 1;
            counts->unspaced += is_unspaced(c);
        }
        i += size;
    }
}

static int64_t find(const uint8_t *data, int64_t from, int64_t n, const char *needle, int size) {
    for (int64_t i = from; i + size <= n; i++) {
        int k = 0;
        while (k < size && data[i + k] == (uint8_t)needle[k]) k++;
        if (k == size) return i;
    }
    return n;
}

/* Past the end of a comment whose text starts at `from`: "-->" or "--!>". */
static int64_t comment_end(const uint8_t *data, int64_t from, int64_t n) {
    for (int64_t i = from; i + 2 < n; i++) {
        const uint8_t *dash = memchr(data + i, '-', n - i - 2);
        if (!dash) break;
        i = dash - data;
        if (data[i + 1] != '-') continue;
        if (data[i + 2] == '>') return i + 3;
        if (data[i + 2] == '!' && i + 3 < n && data[i + 3] == '>') return i + 4;
    }
    return n;
}

static int64_t after_char(const uint8_t *data, int64_t from, int64_t n, uint8_t c) {
    while (from < n && data[from] != c) from++;
    return from < n ? from + 1 : n;
}

static uint8_t lower(uint8_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static int same_name(const uint8_t *data, int64_t start, int64_t end, const char *name) {
    int64_t i = start;
    for (; i < end && *name; i++, name++)
        if (lower(data[i]) != (uint8_t)*name) return 0;
    return i == end && !*name;
}

/* Elements whose content the tokenizer reads as text up to their end tag. */
static const char *RAW_TEXT[] = {"script",   "style",    "xmp",   "iframe", "noembed",
                                 "noframes", "noscript", "title", "textarea", 0};

static const char *raw_text_name(const uint8_t *data, int64_t start, int64_t end) {
    if (end - start < 3 || end - start > 8) return 0; /* most tags: a cheap no */
    uint8_t first = lower(data[start]);
    if (first != 's' && first != 'x' && first != 'i' && first != 'n' && first != 't') return 0;
    for (int k = 0; RAW_TEXT[k]; k++)
        if (same_name(data, start, end, RAW_TEXT[k])) return RAW_TEXT[k];
    return 0;
}

/* Where the raw text that started at `from` ends: at "</name" followed by a tag separator. */
static int64_t raw_text_end(const uint8_t *data, int64_t from, int64_t n, const char *name) {
    int size = 0;
    while (name[size]) size++;
    for (int64_t i = from; i + 2 + size <= n; i++) {
        if (data[i] != '<' || data[i + 1] != '/') continue;
        int k = 0;
        while (k < size && lower(data[i + 2 + k]) == (uint8_t)name[k]) k++;
        if (k < size) continue;
        if (i + 2 + size == n) return i;
        uint8_t after = data[i + 2 + size];
        if (is_tag_space(after) || after == '/' || after == '>') return i;
    }
    return n;
}

enum { BETWEEN, NAME, AFTER_NAME, UNQUOTED };

/* Past the end of a tag whose name ends at `i` (the HTML standard's attribute states). */
static int64_t tag_end(const uint8_t *data, int64_t i, int64_t n) {
    int state = BETWEEN;
    for (; i < n; i++) {
        uint8_t c = data[i];
        if (c == '>') return i + 1;
        if (c == '=' && (state == NAME || state == AFTER_NAME)) { /* a value follows */
            i++;
            while (i < n && is_tag_space(data[i])) i++;
            if (i >= n) return n;
            if (data[i] == '>') return i + 1;
            if (data[i] == '"' || data[i] == '\'') {
                const uint8_t *quote = memchr(data + i + 1, data[i], n - i - 1);
                if (!quote) return n;
                i = quote - data;
                state = BETWEEN;
            } else {
                state = UNQUOTED;
            }
            continue;
        }
        int space = is_tag_space(c);
        switch (state) {
        case BETWEEN:
            if (!space && c != '/') state = NAME;
            break;
        case NAME:
            if (space) state = AFTER_NAME;
            else if (c == '/') state = BETWEEN;
            break;
        case AFTER_NAME:
            if (c == '/') state = BETWEEN;
            else if (!space) state = NAME;
            break;
        case UNQUOTED:
            if (space) state = BETWEEN;
            break;
        }
    }
    return n;
}

/* Past the end of the markup at data[i] == '<', or i when it starts none (a "<" of the text). */
static int64_t markup_end(const uint8_t *data, int64_t i, int64_t n, Counts *counts) {
    uint8_t next = i + 1 < n ? data[i + 1] : 0;
    int closing = next == '/';
    if (is_ascii_alpha(next) || (closing && i + 2 < n && is_ascii_alpha(data[i + 2]))) {
        int64_t name = i + 1 + closing, j = name;
        while (j < n && !is_tag_space(data[j]) && data[j] != '/' && data[j] != '>') j++;
        int64_t end = tag_end(data, j, n);
        if (closing) return end;
        if (j - name == 2 && same_name(data, name, j, "li")) counts->items++;
        if (j - name == 9 && same_name(data, name, j, "plaintext")) {
            counts->in_word = 0;
            count_text(data, end, n, counts);
            return n;
        }
        const char *raw = raw_text_name(data, name, j);
        if (raw) {
            int64_t stop = raw_text_end(data, end, n, raw);
            counts->in_word = 0;
            count_text(data, end, stop, counts);
            return stop;
        }
        return end;
    }
    if (next == '!') {
        if (i + 3 < n && data[i + 2] == '-' && data[i + 3] == '-') {
            int64_t k = i + 4; /* "<!-->" and "<!--->" end at once */
            if (k < n && data[k] == '>') return k + 1;
            if (k + 1 < n && data[k] == '-' && data[k + 1] == '>') return k + 2;
            return comment_end(data, k, n);
        }
        if (find(data, i + 2, i + 9 <= n ? i + 9 : i, "[CDATA[", 7) == i + 2) {
            /* text in SVG and MathML, a comment to the first ">" elsewhere: counted as text
             * (what an earlier section counted, once), then read on as a comment */
            int64_t from = i + 9 > counts->cdata_counted ? i + 9 : counts->cdata_counted;
            if (from < n) {
                int64_t stop = find(data, from, n, "]]>", 3);
                counts->in_word = 0;
                count_text(data, from, stop, counts);
                counts->cdata_counted = stop;
            }
        }
        return after_char(data, i + 2, n, '>');
    }
    if (next == '?' || closing) return after_char(data, i + 2, n, '>');
    return i;
}

int64_t html_words_bound(const uint8_t *data, int64_t n) {
    static int ready = 0;
    if (!ready) {
        init_ascii_parts();
        ready = 1;
    }
    Counts counts = {0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    while (i < n) {
        const uint8_t *markup = memchr(data + i, '<', n - i);
        int64_t text = i;
        i = markup ? markup - data : n;
        count_text(data, text, i, &counts);
        if (i >= n) break;
        int64_t end = markup_end(data, i, n, &counts);
        if (end == i) { /* a "<" of the text */
            count_text(data, i, i + 1, &counts);
            i++;
        } else {
            counts.in_word = 0; /* markup may separate words */
            i = end;
        }
    }
    return counts.words + (counts.unspaced + 2 * counts.references) / 2 + counts.items;
}
