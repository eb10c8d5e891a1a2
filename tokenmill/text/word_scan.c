/* The word scanner of word_scan.py: text.WORD_PATTERN and the joins before it (text._JOINS),
 * alternative by alternative as the regex engine's leftmost-first search tries them, over the
 * UTF-8 texts of an Arrow string array. Per word: its length in code points, an FNV-1a hash of
 * its code points and flags (ALPHA, CONTENT). Character classes come from the caller
 * (word_scan.char_classes: the regex engine's own). Then what the filters count over those words,
 * a text at a time: Gopher repetition's n-grams (ngram_stats) and Gopher quality's totals
 * (word_totals). And C4's sentences in a line (count_sentences), as the regexes of c4.py find
 * them; over the texts' characters, Gopher quality's symbol and line counts (text_totals) and
 * Gopher repetition's repeated lines and paragraphs (element_duplicates); and C4's line rules
 * (c4_measure). Built by hatch_build.py; loaded by ctypes. */

#define _GNU_SOURCE /* memmem */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

enum { WORD = 1, LETTER = 2, LOWER = 4, DIGIT = 8, SPACE = 16, PUNCT = 32, P = 64, UPPER = 128 };
enum { ALPHA = 1, CONTENT = 2 };
enum { APOSTROPHE = 39, RIGHT_QUOTE = 0x2019, UNDERSCORE = 95, DOT = 46, HYPHEN = 45, SLASH = 47 };

/* UTF-8 (valid: Arrow strings are) to code points and their classes; their number. */
static int64_t decode(const uint8_t *data, int64_t start, int64_t end, int32_t *cp,
                      uint8_t *kinds, const uint8_t *classes) {
    int64_t n = 0;
    for (int64_t i = start; i < end; n++) {
        int size;
        cp[n] = code_point_at(data, i, &size);
        kinds[n] = classes[cp[n]];
        i += size;
    }
    return n;
}

/* The longest of n texts (offsets: n + 1), in bytes. */
static int64_t longest_text(const int64_t *offsets, int64_t n) {
    int64_t longest = 0;
    for (int64_t d = 0; d < n; d++)
        if (offsets[d + 1] - offsets[d] > longest) longest = offsets[d + 1] - offsets[d];
    return longest;
}

static int is_one_of(int32_t c, const char *chars) {
    for (; *chars; chars++)
        if (c == *chars) return 1;
    return 0;
}

/* Length of text._ELISION matched at i (0: none), its alternatives in order. */
static int elision(const int32_t *cp, const uint8_t *kinds, int64_t n, int64_t i) {
    if (i >= n) return 0;
    int32_t c = cp[i];
    if ((c >= 'a' && c <= 'z' && !is_one_of(c, "dlmrstv")) ||
        (c >= 'A' && c <= 'Z' && !is_one_of(c, "DLMRSTV")))
        return 1; /* [abcefghijknopquwxyzABCEFGHIJKNOPQUWXYZ] */
    int next_is_word = i + 1 < n && (kinds[i + 1] & WORD);
    int third_is_word = i + 2 < n && (kinds[i + 2] & WORD);
    int32_t next = i + 1 < n ? cp[i + 1] : -1;
    if (is_one_of(c, "sSdDmMtT") && next_is_word) return 2; /* [sSdDmMtT]\w */
    if (c == 'l' || c == 'L') {                               /* [lL](?:[lL]\w|[^\WlL]) */
        if ((next == 'l' || next == 'L') && third_is_word) return 3;
        if (next_is_word && next != 'l' && next != 'L') return 2;
    }
    if (is_one_of(c, "rRvV")) { /* [rRvV](?:[eE]\w|[^\WeE]) */
        if ((next == 'e' || next == 'E') && third_is_word) return 3;
        if (next_is_word && next != 'e' && next != 'E') return 2;
    }
    if (c >= 0x80 && (kinds[i] & WORD)) return 1; /* [^\W\x00-\x7F] */
    return 0;
}

/* text._joined in place: each pattern replaces, left to right without overlaps, its joining
 * character by "_" (one code point for one: word offsets stay). */
static void join(int32_t *cp, uint8_t *kinds, int64_t n, uint8_t joined) {
    for (int64_t i = 0; i + 2 < n;) { /* (\w)['’](ELISION) */
        if ((cp[i + 1] == APOSTROPHE || cp[i + 1] == RIGHT_QUOTE) && (kinds[i] & WORD)) {
            int length = elision(cp, kinds, n, i + 2);
            if (length) {
                cp[i + 1] = UNDERSCORE;
                kinds[i + 1] = joined;
                i += 2 + length;
                continue;
            }
        }
        i++;
    }
    for (int64_t i = 0; i + 2 < n;) { /* (\w)[\[({](\w) */
        int32_t joint = cp[i + 1];
        if ((joint == '[' || joint == '(' || joint == '{') && (kinds[i] & WORD) &&
            (kinds[i + 2] & WORD)) {
            cp[i + 1] = UNDERSCORE;
            kinds[i + 1] = joined;
            i += 3;
            continue;
        }
        i++;
    }
    for (int64_t i = 0; i + 2 < n;) { /* (\p{L})-(\d) */
        if (cp[i + 1] == HYPHEN && (kinds[i] & LETTER) && (kinds[i + 2] & DIGIT)) {
            cp[i + 1] = UNDERSCORE;
            kinds[i + 1] = joined;
            i += 3;
            continue;
        }
        i++;
    }
}

/* End of (?:https?://|www\.)\S*[^\s.,;:!?'"()\[\]{}<>] matched at i (0: none). */
static int64_t url_end(const int32_t *cp, const uint8_t *kinds, int64_t n, int64_t i) {
    int64_t start = 0;
    if (cp[i] == 'h' && i + 7 <= n && cp[i + 1] == 't' && cp[i + 2] == 't' && cp[i + 3] == 'p') {
        int64_t colon = cp[i + 4] == 's' ? i + 5 : i + 4; /* https? */
        if (colon + 3 <= n && cp[colon] == ':' && cp[colon + 1] == '/' && cp[colon + 2] == '/')
            start = colon + 3;
    } else if (cp[i] == 'w' && i + 4 <= n && cp[i + 1] == 'w' && cp[i + 2] == 'w' &&
               cp[i + 3] == '.') {
        start = i + 4;
    }
    int64_t end = 0;
    for (int64_t j = start; start && j < n && !(kinds[j] & SPACE); j++)
        if (!is_one_of(cp[j], ".,;:!?'\"()[]{}<>")) end = j + 1;
    return end;
}

/* Whether cp[start, end) is one of the abbreviations (rows of abbr_width code points, 0-padded;
 * lengths: each one's). */
static int is_abbreviation(const int32_t *cp, int64_t start, int64_t end,
                           const int32_t *abbreviations, const int64_t *lengths, int64_t n_abbr,
                           int64_t abbr_width) {
    if (end - start > abbr_width) return 0;
    for (int64_t row = 0; row < n_abbr; row++) {
        if (lengths[row] != end - start) continue;
        int64_t k = 0;
        while (k < end - start && cp[start + k] == abbreviations[row * abbr_width + k]) k++;
        if (k == end - start) return 1;
    }
    return 0;
}

/* End of the word WORD_PATTERN matches at the non-space position i: its alternatives in order
 * (the last, \S, always matches). */
static int64_t word_end(const int32_t *cp, const uint8_t *kinds, int64_t n, int64_t i,
                        const int32_t *abbreviations, const int64_t *lengths, int64_t n_abbr,
                        int64_t abbr_width) {
    int32_t c = cp[i];
    uint8_t kind = kinds[i];
    if (c == 'h' || c == 'w') {
        int64_t end = url_end(cp, kinds, n, i);
        if (end) return end;
    }
    if ((kind & LETTER) && i + 1 < n && cp[i + 1] == DOT) { /* (?:\p{L}\.){2,}|\p{L}\. */
        int64_t pairs = 1;
        while (i + 2 * pairs + 1 < n && (kinds[i + 2 * pairs] & LETTER) &&
               cp[i + 2 * pairs + 1] == DOT)
            pairs++;
        return i + 2 * pairs;
    }
    if (kind & WORD) {
        int64_t j = i + 1;
        while (j < n && (kinds[j] & WORD)) j++;
        /* (?:ABBREVIATIONS)\.: they are word characters only, so they are the whole run */
        if (j < n && cp[j] == DOT &&
            is_abbreviation(cp, i, j, abbreviations, lengths, n_abbr, abbr_width))
            return j + 1;
        while (j + 1 < n) { /* \w+(?:(?:[.,:/]\d|\.\p{Ll}|[@&]\w)\w*)* */
            int32_t joint = cp[j];
            uint8_t after = kinds[j + 1];
            if (!((is_one_of(joint, ".,:/") && (after & DIGIT)) || (joint == DOT && (after & LOWER)) ||
                  ((joint == '@' || joint == '&') && (after & WORD))))
                break;
            j += 2;
            while (j < n && (kinds[j] & WORD)) j++;
        }
        return j;
    }
    if ((c == APOSTROPHE || c == RIGHT_QUOTE) && i + 1 < n) { /* ['’](?:[sSdDmMtT]|ll|...) */
        int32_t second = cp[i + 1], third = i + 2 < n ? cp[i + 2] : -1;
        if (is_one_of(second, "sSdDmMtT")) return i + 2;
        if ((second == 'l' && third == 'l') || (second == 'L' && third == 'L') ||
            ((second == 'r' || second == 'v') && third == 'e') ||
            ((second == 'R' || second == 'V') && third == 'E'))
            return i + 3;
    }
    if (c == DOT || c == HYPHEN || c == SLASH) { /* \.{2,}|-{2,}|/{2,} */
        int64_t j = i + 1;
        while (j < n && cp[j] == c) j++;
        if (j - i >= 2) return j;
    }
    if (c == APOSTROPHE && i + 1 < n && cp[i + 1] == APOSTROPHE) return i + 2; /* '' */
    return i + 1;                                                              /* \S */
}

/* The words of cp[0, n) (joined first: cp and kinds change), their lengths, hashes and flags
 * written from index 0 (or, chars NULL, counted only); their number. */
static int64_t words_in(int32_t *cp, uint8_t *kinds, int64_t n, const uint8_t *classes,
                        const int32_t *abbreviations, const int64_t *lengths, int64_t n_abbr,
                        int64_t abbr_width, uint32_t *chars, uint64_t *hashes, uint8_t *flags) {
    join(cp, kinds, n, classes[UNDERSCORE]);
    int64_t w = 0;
    for (int64_t i = 0; i < n;) {
        if (kinds[i] & SPACE) {
            i++;
            continue;
        }
        int64_t end = word_end(cp, kinds, n, i, abbreviations, lengths, n_abbr, abbr_width);
        if (chars) {
            uint64_t digest = 0xCBF29CE484222325ULL;
            uint8_t word_flags = 0;
            for (int64_t k = i; k < end; k++) {
                digest = (digest ^ (uint64_t)cp[k]) * 0x100000001B3ULL;
                if (kinds[k] & LETTER) word_flags |= ALPHA;
                if (!(kinds[k] & PUNCT)) word_flags |= CONTENT;
            }
            chars[w] = (uint32_t)(end - i);
            hashes[w] = digest;
            flags[w] = word_flags;
        }
        w++;
        i = end;
    }
    return w;
}

/* The words of n_docs texts (offsets: n_docs + 1 byte offsets into data). counts[d]: words of
 * text d; chars, hashes, flags: one entry per word, room for capacity of them (a text has at
 * most one word per code point), or all NULL: counts only. Returns the number of words, or -1
 * when out of memory. */
int64_t scan_words(const uint8_t *data, const int64_t *offsets, int64_t n_docs,
                   const uint8_t *classes, const int32_t *abbreviations, const int64_t *lengths,
                   int64_t n_abbr, int64_t abbr_width, int64_t *counts, uint32_t *chars,
                   uint64_t *hashes, uint8_t *flags) {
    int64_t longest = longest_text(offsets, n_docs);
    int32_t *cp = malloc((longest + 1) * sizeof(int32_t));
    uint8_t *kinds = malloc(longest + 1);
    if (!cp || !kinds) {
        free(cp);
        free(kinds);
        return -1;
    }
    int64_t w = 0;
    for (int64_t d = 0; d < n_docs; d++) {
        int64_t n = decode(data, offsets[d], offsets[d + 1], cp, kinds, classes);
        counts[d] = words_in(cp, kinds, n, classes, abbreviations, lengths, n_abbr, abbr_width,
                             chars ? chars + w : NULL, hashes ? hashes + w : NULL,
                             flags ? flags + w : NULL);
        w += counts[d];
    }
    free(cp);
    free(kinds);
    return w;
}

/* Keys in an open-addressing table (linear probing): each slot's key and how often it was
 * counted (0: empty). */
typedef struct {
    uint64_t *keys;
    int64_t *counts;
    int64_t mask;
} KeyTable;

/* The slots count keys take: twice as many, a power of two (linear probing stays short). */
static int64_t key_table_size(int64_t count) {
    int64_t size = 16;
    while (size < 2 * count) size <<= 1;
    return size;
}

/* A table for up to count keys, empty. */
static int key_table_init(KeyTable *table, int64_t count) {
    int64_t size = key_table_size(count);
    table->mask = size - 1;
    table->keys = malloc(size * sizeof(uint64_t));
    table->counts = calloc(size, sizeof(int64_t));
    return table->keys && table->counts ? 0 : -1;
}

static void key_table_free(KeyTable *table) {
    free(table->keys);
    free(table->counts);
}

/* The slot holding key, or the empty one where it goes. */
static int64_t key_slot(const KeyTable *table, uint64_t key) {
    int64_t slot = (int64_t)((key * 0x9E3779B97F4A7C15ULL) >> 1) & table->mask;
    while (table->counts[slot] && table->keys[slot] != key) slot = (slot + 1) & table->mask;
    return slot;
}

/* A key table cleared for count keys (at most the capacity it was allocated for): only the
 * slots it will use are zeroed, so a small document's keys stay in the CPU cache. */
static void key_table_reset(KeyTable *table, int64_t count) {
    int64_t size = key_table_size(count);
    table->mask = size - 1;
    memset(table->counts, 0, size * sizeof(int64_t));
}

/* Where n appears in sizes (-1: not there). */
static int64_t index_of(const int64_t *sizes, int64_t count, int64_t n) {
    for (int64_t i = 0; i < count; i++)
        if (sizes[i] == n) return i;
    return -1;
}

/* Gopher repetition's n-gram statistics (gopher_repetition.GopherRepetitionFilter), a document
 * at a time. Words: their hashes and lengths, doc_words per document. For each n of top_sizes:
 * the characters of the document's most frequent n-gram (joined by spaces, the first seen among
 * equals) times its count, into top (n_docs x n_top). For each n of dup_sizes, into dup: the
 * characters of the words in n-grams repeating an earlier one (the union of their spans), or,
 * where that share of doc_chars is above dup_exact[i], datatrove's find_all_duplicate walk:
 * exact. With stop, a document is left at zero once it passes a limit (top_limit, then
 * dup_limit: the rules in order) and every rule before that one is known: later rules cannot
 * change its first failing rule. An n-gram can only repeat where its (n-1)-gram prefix does:
 * each step extends only the repeated ones. Returns 0, or -1 when out of memory. */
int ngram_stats(const uint64_t *hashes, const uint32_t *chars, const int64_t *doc_words,
                const double *doc_chars, int64_t n_docs, const int64_t *top_sizes,
                const double *top_limit, int64_t n_top, const int64_t *dup_sizes,
                const double *dup_exact, const double *dup_limit, int64_t n_dup, int stop,
                int64_t *top, int64_t *dup) {
    int64_t most = 1, max_n = 0;
    for (int64_t d = 0; d < n_docs; d++) most = doc_words[d] > most ? doc_words[d] : most;
    for (int64_t i = 0; i < n_top; i++) max_n = top_sizes[i] > max_n ? top_sizes[i] : max_n;
    for (int64_t i = 0; i < n_dup; i++) max_n = dup_sizes[i] > max_n ? dup_sizes[i] : max_n;
    int64_t *cum = malloc((most + 1) * sizeof(int64_t));
    int64_t *starts = malloc(most * sizeof(int64_t));
    uint64_t *keys = malloc(most * sizeof(uint64_t));
    int64_t *slots = malloc(most * sizeof(int64_t));
    uint8_t *first = malloc(most);
    int64_t rules = n_top + n_dup, none = rules;
    int64_t *known_at = malloc((rules + 1) * sizeof(int64_t)); /* n when the rules before are */
    KeyTable table = {0}; /* counts an n's keys, then holds the walk's seen ones */
    int ok = cum && starts && keys && slots && first && known_at &&
             key_table_init(&table, most) == 0;
    for (int64_t r = 0; ok && r <= rules; r++) {
        known_at[r] = r ? known_at[r - 1] : 0;
        int64_t size = r == 0 ? 0 : r - 1 < n_top ? top_sizes[r - 1] : dup_sizes[r - 1 - n_top];
        known_at[r] = size > known_at[r] ? size : known_at[r];
    }
    int64_t offset = 0;
    for (int64_t d = 0; ok && d < n_docs; offset += doc_words[d], d++) {
        const uint64_t *hash = hashes + offset;
        int64_t words = doc_words[d], count = words, failed = none; /* first rule passed */
        cum[0] = 0;
        for (int64_t i = 0; i < words; i++) {
            cum[i + 1] = cum[i] + chars[offset + i];
            starts[i] = i;
            keys[i] = hash[i];
        }
        for (int64_t n = 1; n <= max_n && !(stop && failed < none && known_at[failed] < n); n++) {
            int64_t t = index_of(top_sizes, n_top, n), u = index_of(dup_sizes, n_dup, n);
            if (n > 1) { /* the repeated (n-1)-grams with room for one more word, extended */
                int64_t kept = 0;
                for (int64_t i = 0; i < count; i++) {
                    if (starts[i] + n > words) continue;
                    starts[kept] = starts[i];
                    keys[kept++] = keys[i] * 0x9E3779B97F4A7C15ULL + hash[starts[i] + n - 1];
                }
                count = kept;
            }
            if (n == 1 && t < 0 && u < 0) continue; /* most single words repeat: not worth it */
            key_table_reset(&table, count);
            for (int64_t i = 0; i < count; i++) {
                int64_t slot = key_slot(&table, keys[i]);
                first[i] = table.counts[slot] == 0;
                table.keys[slot] = keys[i];
                table.counts[slot]++;
                slots[i] = slot;
            }
            if (t >= 0 && words >= n) {
                int64_t best = -1, best_count = 1;
                for (int64_t i = 0; i < count; i++) {
                    if (table.counts[slots[i]] > best_count) {
                        best_count = table.counts[slots[i]];
                        best = starts[i];
                    }
                }
                int64_t at = best < 0 ? 0 : best;
                int64_t found = (cum[at + n] - cum[at] + n - 1) * best_count;
                top[d * n_top + t] = found;
                if ((double)found / doc_chars[d] > top_limit[t] && t < failed) failed = t;
            }
            int64_t kept = 0;
            for (int64_t i = 0; i < count; i++) {
                if (table.counts[slots[i]] < 2) continue;
                starts[kept] = starts[i];
                keys[kept] = keys[i];
                first[kept++] = first[i];
            }
            count = kept;
            if (u >= 0) {
                int64_t covered = 0, previous_end = 0;
                for (int64_t i = 0; i < count; i++) {
                    if (first[i]) continue;
                    int64_t from = starts[i] > previous_end ? starts[i] : previous_end;
                    covered += cum[starts[i] + n] - cum[from];
                    previous_end = starts[i] + n;
                }
                if (!(stop && failed < n_top + u) && (double)covered / doc_chars[d] > dup_exact[u]) {
                    int64_t next_free = 0;
                    covered = 0;
                    key_table_reset(&table, count);
                    for (int64_t i = 0; i < count; i++) {
                        if (starts[i] < next_free) continue;
                        int64_t slot = key_slot(&table, keys[i]);
                        if (table.counts[slot]) {
                            covered += cum[starts[i] + n] - cum[starts[i]];
                            next_free = starts[i] + n;
                        } else {
                            table.keys[slot] = keys[i];
                            table.counts[slot] = 1;
                        }
                    }
                }
                dup[d * n_dup + u] = covered;
                if ((double)covered / doc_chars[d] > dup_limit[u] && n_top + u < failed)
                    failed = n_top + u;
            }
        }
    }
    free(cum);
    free(starts);
    free(keys);
    free(slots);
    free(first);
    free(known_at);
    key_table_free(&table);
    return ok ? 0 : -1;
}

/* Per text of the words (doc_words of them each): words holding a non-punctuation character
 * and their characters, words holding a letter, and how many distinct words of stop (sorted
 * hashes) it holds (gopher_quality.GopherQualityFilter). Returns 0, or -1 when out of memory. */
int word_totals(const uint32_t *chars, const uint8_t *flags, const uint64_t *hashes,
                const int64_t *doc_words, int64_t n_docs, const uint64_t *stop, int64_t n_stop,
                int64_t *n_content, int64_t *content_chars, int64_t *n_alpha,
                int64_t *stop_words) {
    int64_t *seen_in = malloc((n_stop + 1) * sizeof(int64_t)); /* the text a stop word was in */
    if (!seen_in) return -1;
    for (int64_t s = 0; s < n_stop; s++) seen_in[s] = -1;
    int64_t w = 0;
    for (int64_t d = 0; d < n_docs; d++) {
        int64_t content = 0, letters = 0, alpha = 0, found = 0;
        for (int64_t end = w + doc_words[d]; w < end; w++) {
            if (flags[w] & CONTENT) {
                content++;
                letters += chars[w];
            }
            alpha += (flags[w] & ALPHA) != 0;
            int64_t low = 0, high = n_stop; /* the first stop hash >= the word's */
            while (low < high) {
                int64_t middle = (low + high) / 2;
                if (stop[middle] < hashes[w]) low = middle + 1;
                else high = middle;
            }
            if (low < n_stop && stop[low] == hashes[w] && seen_in[low] != d) {
                seen_in[low] = d;
                found++;
            }
        }
        n_content[d] = content;
        content_chars[d] = letters;
        n_alpha[d] = alpha;
        stop_words[d] = found;
    }
    free(seen_in);
    return 0;
}

static int is_ascii_letter(int32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* Whether the letters cp[start, end) are [A-Za-z] or one of the abbreviations. */
static int is_short_word(const int32_t *cp, int64_t start, int64_t end,
                         const int32_t *abbreviations, const int64_t *lengths, int64_t n_abbr,
                         int64_t abbr_width) {
    return end - start == 1 ||
           is_abbreviation(cp, start, end, abbreviations, lengths, n_abbr, abbr_width);
}

/* c4._SENTENCE_END's characters, ascending (all of them \p{P}; tests/test_word_scan.py holds
 * them equal to what polars' regex engine finds) */
static const int32_t SENTENCE_ENDS[] = {
    0x21, 0x2E, 0x3F, 0x589, 0x61D, 0x61E, 0x61F, 0x6D4, 0x700, 0x701, 0x702, 0x7F9, 0x837,
    0x839, 0x83D, 0x83E, 0x964, 0x965, 0x104B, 0x1362, 0x1367, 0x1368, 0x166E, 0x1735, 0x1736,
    0x17D4, 0x17D5, 0x1803, 0x1809, 0x1944, 0x1945, 0x1AA8, 0x1AA9, 0x1AAA, 0x1AAB, 0x1B4E,
    0x1B4F, 0x1B5A, 0x1B5B, 0x1B5E, 0x1B5F, 0x1B7D, 0x1B7E, 0x1B7F, 0x1C3B, 0x1C3C, 0x1C7E,
    0x1C7F, 0x203C, 0x203D, 0x2047, 0x2048, 0x2049, 0x2CF9, 0x2CFA, 0x2CFB, 0x2E2E,
    0x2E3C, 0x2E53, 0x2E54, 0x3002, 0xA4FF, 0xA60E, 0xA60F, 0xA6F3, 0xA6F7, 0xA876, 0xA877,
    0xA8CE, 0xA8CF, 0xA92F, 0xA9C8, 0xA9C9, 0xAA5D, 0xAA5E, 0xAA5F, 0xAAF0, 0xAAF1, 0xABEB,
    0xFE12, 0xFE15, 0xFE16, 0xFE52, 0xFE56, 0xFE57, 0xFF01, 0xFF0E, 0xFF1F, 0xFF61, 0x10A56,
    0x10A57, 0x10F55, 0x10F56, 0x10F57, 0x10F58, 0x10F59, 0x10F86, 0x10F87, 0x10F88, 0x10F89,
    0x11047, 0x11048, 0x110BE, 0x110BF, 0x110C0, 0x110C1, 0x11141, 0x11142, 0x11143, 0x111C5,
    0x111C6, 0x111CD, 0x111DE, 0x111DF, 0x11238, 0x11239, 0x1123B, 0x1123C, 0x112A9, 0x113D4,
    0x113D5, 0x1144B, 0x1144C, 0x115C2, 0x115C3, 0x115C9, 0x115CA, 0x115CB, 0x115CC, 0x115CD,
    0x115CE, 0x115CF, 0x115D0, 0x115D1, 0x115D2, 0x115D3, 0x115D4, 0x115D5, 0x115D6, 0x115D7,
    0x11641, 0x11642, 0x1173C, 0x1173D, 0x1173E, 0x11944, 0x11946, 0x11A42, 0x11A43, 0x11A9B,
    0x11A9C, 0x11C41, 0x11C42, 0x11EF7, 0x11EF8, 0x11F43, 0x11F44, 0x16A6E, 0x16A6F, 0x16AF5,
    0x16B37, 0x16B38, 0x16B44, 0x16D6E, 0x16D6F, 0x16E98, 0x1BC9F, 0x1DA88,
};

static int is_sentence_end(int32_t c) {
    size_t low = 0, high = sizeof SENTENCE_ENDS / sizeof SENTENCE_ENDS[0];
    if (c < 0x80) return c == '.' || c == '!' || c == '?';
    while (low < high) {
        size_t middle = (low + high) / 2;
        if (SENTENCE_ENDS[middle] < c) low = middle + 1;
        else high = middle;
    }
    return low < sizeof SENTENCE_ENDS / sizeof SENTENCE_ENDS[0] && SENTENCE_ENDS[low] == c;
}

/* The code points (and classes) of cp[0, n) that c4._NON_SENTENCE_PERIODS leaves, as
 * str.replace_all(_NON_SENTENCE_PERIODS, "$1") does, in out (and out_kinds); their number.
 * Every match holds a period: \.{2,} starts at one, and (^|\W)(?:[A-Za-z]|ABBREVIATIONS)\. ends
 * at one, its letters being the whole run of ASCII letters before it (the abbreviations are
 * ASCII letters, and a letter before them would be \w). At each period, in order, the second
 * (starting earlier) is tried first; a match cannot start inside the previous one (before
 * `taken`). */
static int64_t without_non_sentence_periods(const int32_t *cp, const uint8_t *kinds, int64_t n,
                                             int32_t *out, uint8_t *out_kinds,
                                             const int32_t *abbreviations, const int64_t *lengths,
                                             int64_t n_abbr, int64_t abbr_width) {
    int64_t w = 0, taken = 0;
    for (int64_t i = 0; i < n;) {
        if (cp[i] != DOT) {
            out[w] = cp[i];
            out_kinds[w++] = kinds[i++];
            continue;
        }
        int64_t letters = 0; /* the run of ASCII letters before the period, all of them kept */
        while (letters < i && letters <= abbr_width && is_ascii_letter(cp[i - letters - 1]))
            letters++;
        int64_t start = i - letters; /* of the letters; the match starts before them, or at ^ */
        if (letters && letters <= abbr_width &&
            (start == 0 ? taken == 0 : start - 1 >= taken && !(kinds[start - 1] & WORD)) &&
            is_short_word(cp, start, i, abbreviations, lengths, n_abbr, abbr_width)) {
            w -= letters;
            taken = ++i;
            continue;
        }
        if (i + 1 < n && cp[i + 1] == DOT) {
            while (i < n && cp[i] == DOT) i++;
            taken = i;
            continue;
        }
        out[w] = cp[i];
        out_kinds[w++] = kinds[i++];
    }
    return w;
}

/* The sentences of cp[0, n) (c4's regexes, see count_sentences); out, out_kinds: room for n. */
static int64_t sentences_in(const int32_t *cp, const uint8_t *kinds, int64_t n, int32_t *out,
                            uint8_t *out_kinds, const int32_t *abbreviations,
                            const int64_t *lengths, int64_t n_abbr, int64_t abbr_width) {
    n = without_non_sentence_periods(cp, kinds, n, out, out_kinds, abbreviations, lengths, n_abbr,
                                     abbr_width);
    int64_t found = 0;
    for (int64_t i = 0; i < n;) {
        /* _SENTENCE_END\p{P}*\s[\s\p{P}]*[^\s\p{P}] */
        if ((out_kinds[i] & P) && is_sentence_end(out[i])) {
            int64_t j = i + 1;
            while (j < n && (out_kinds[j] & P)) j++;
            if (j < n && (out_kinds[j] & SPACE)) {
                while (j < n && (out_kinds[j] & (SPACE | P))) j++;
                if (j < n) {
                    found++;
                    i = j + 1;
                    continue;
                }
            }
        } else if (i + 2 < n && out[i + 1] == DOT && (out_kinds[i] & LOWER) &&
                   (out_kinds[i + 2] & UPPER)) { /* \p{Ll}\.\p{Lu} */
            found++;
            i += 3;
            continue;
        }
        i++;
    }
    return found + 1;
}

/* word_scan.count_sentences of n strings (offsets: n + 1 byte offsets into data): per string,
 * the matches of c4._SENTENCE_BOUNDARY, searched leftmost-first without overlaps, plus one,
 * once c4._NON_SENTENCE_PERIODS' are removed. Returns 0, or -1 when out of memory. */
int count_sentences(const uint8_t *data, const int64_t *offsets, int64_t n_strings,
                    const uint8_t *classes, const int32_t *abbreviations, const int64_t *lengths,
                    int64_t n_abbr, int64_t abbr_width, int64_t *counts) {
    int64_t longest = longest_text(offsets, n_strings);
    int32_t *read = malloc(2 * (longest + 1) * sizeof(int32_t)), *cp = read + longest + 1;
    uint8_t *read_kinds = malloc(2 * (longest + 1)), *kinds = read_kinds + longest + 1;
    if (!read || !read_kinds) {
        free(read);
        free(read_kinds);
        return -1;
    }
    for (int64_t d = 0; d < n_strings; d++) {
        int64_t n = decode(data, offsets[d], offsets[d + 1], read, read_kinds, classes);
        counts[d] = sentences_in(read, read_kinds, n, cp, kinds, abbreviations, lengths, n_abbr,
                                 abbr_width);
    }
    free(read);
    free(read_kinds);
    return 0;
}

/* Where the code point ending before data[end] starts (start < end). */
static int64_t code_point_before(const uint8_t *data, int64_t start, int64_t end) {
    int64_t i = end - 1;
    while (i > start && (data[i] & 0xC0) == 0x80) i--;
    return i;
}

/* [start, end) less the \s code points at its start and at its end: *start, *end moved. */
static void strip_spaces(const uint8_t *data, int64_t *start, int64_t *end,
                         const uint8_t *classes) {
    int size;
    while (*start < *end && (classes[code_point_at(data, *start, &size)] & SPACE)) *start += size;
    while (*end > *start) {
        int64_t last = code_point_before(data, *start, *end);
        if (!(classes[code_point_at(data, last, &size)] & SPACE)) break;
        *end = last;
    }
}

/* Length of the str.splitlines() line break at data[i] (text.LINE_BREAKS; "\r\n" is one), or 0. */
static int line_break_at(const uint8_t *data, int64_t i, int64_t end) {
    uint8_t b = data[i];
    if (b == '\n' || b == 0x0B || b == 0x0C || b == 0x1C || b == 0x1D || b == 0x1E) return 1;
    if (b == '\r') return i + 1 < end && data[i + 1] == '\n' ? 2 : 1;
    if (b == 0xC2 && i + 1 < end && data[i + 1] == 0x85) return 2;
    if (b == 0xE2 && i + 2 < end && data[i + 1] == 0x80 &&
        (data[i + 2] == 0xA8 || data[i + 2] == 0xA9))
        return 3;
    return 0;
}

static int is_ellipsis(const uint8_t *data, int64_t i) { /* "..." or "…" at data[i] */
    return (data[i] == '.' && data[i + 1] == '.' && data[i + 2] == '.') ||
           (data[i] == 0xE2 && data[i + 1] == 0x80 && data[i + 2] == 0xA6);
}

/* The bytes text_totals stops at: line breaks (those of str.splitlines(); "\x85", U+2028 and
 * U+2029 start with 0xC2 or 0xE2), "#", "." and the start of "…" (0xE2). */
static const uint8_t TOTALS_STOP[256] = {['\n'] = 1, ['\r'] = 1, [0x0B] = 1, [0x0C] = 1,
                                         [0x1C] = 1, [0x1D] = 1, [0x1E] = 1, ['#'] = 1,
                                         ['.'] = 1, [0xC2] = 1, [0xE2] = 1};

/* Gopher quality's counts over each text's characters and lines (its line breaks those of
 * str.splitlines()): "#", "..." and "…" (count_matches: without overlaps), lines, lines starting
 * with "•" or "-" after \s, lines ending with "..." or "…" before \s. */
void text_totals(const uint8_t *data, const int64_t *offsets, int64_t n_docs,
                 const uint8_t *classes, int64_t *hashes, int64_t *ellipses, int64_t *lines,
                 int64_t *bullet_lines, int64_t *ellipsis_lines) {
    for (int64_t d = 0; d < n_docs; d++) {
        int64_t start = offsets[d], end = offsets[d + 1], line = start, breaks = 0;
        int64_t hash = 0, ellipsis = 0, bullets = 0, ending = 0;
        for (int64_t i = start;;) {
            while (i < end && !TOTALS_STOP[data[i]]) i++;
            int length = i < end ? line_break_at(data, i, end) : 0;
            if (length || i >= end) { /* the line [line, i) */
                int64_t first = line, last = i;
                strip_spaces(data, &first, &last, classes);
                int size;
                if (first < last) {
                    int32_t c = code_point_at(data, first, &size);
                    bullets += c == '-' || c == 0x2022;
                    ending += last - first >= 3 && is_ellipsis(data, last - 3);
                }
                if (i >= end) break;
                breaks++;
                i += length;
                line = i;
                continue;
            }
            if (data[i] == '#') {
                hash++;
            } else if (i + 2 < end && is_ellipsis(data, i)) {
                ellipsis++;
                i += 3;
                continue;
            }
            i++;
        }
        hashes[d] = hash;
        ellipses[d] = ellipsis;
        /* a break ending the text ends its last line: no line after it */
        lines[d] = end == start ? 0 : breaks + (line < end);
        bullet_lines[d] = bullets;
        ellipsis_lines[d] = ending;
    }
}

/* A 64-bit hash of n bytes, 8 at a time. */
static uint64_t hash_bytes(const uint8_t *data, int64_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n, word;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&word, data + i, 8);
        h = (h ^ word) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    word = 0;
    memcpy(&word, data + i, n - i);
    h = (h ^ word) * 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 29);
}

static int64_t code_points(const uint8_t *data, int64_t start, int64_t end) {
    int64_t n = 0;
    for (int64_t i = start; i < end; i++) n += (data[i] & 0xC0) != 0x80;
    return n;
}

static int64_t count_byte(const uint8_t *data, int64_t start, int64_t end, uint8_t byte) {
    int64_t n = 0;
    for (const uint8_t *at = data + start, *stop = data + end;
         (at = memchr(at, byte, stop - at)) != NULL; at++)
        n++;
    return n;
}

/* Where the next byte of data[from, end) is, or end. */
static int64_t next_byte(const uint8_t *data, int64_t from, int64_t end, uint8_t byte) {
    const uint8_t *at = from < end ? memchr(data + from, byte, end - from) : NULL;
    return at ? at - data : end;
}

/* How many elements data[start, end) splits into at most: one more than its "\n" bytes (and,
 * with nul, its NUL bytes). */
static int64_t elements_at_most(const uint8_t *data, int64_t start, int64_t end, int nul) {
    return count_byte(data, start, end, '\n') + (nul ? count_byte(data, start, end, 0) : 0) + 1;
}

/* A key table for the elements of any one of the texts (elements_at_most); 0, or -1 when out of
 * memory. */
static int key_table_for_texts(KeyTable *table, const uint8_t *data, const int64_t *offsets,
                               int64_t n_docs, int nul) {
    int64_t most = 0;
    for (int64_t d = 0; d < n_docs; d++) {
        int64_t n = elements_at_most(data, offsets[d], offsets[d + 1], nul);
        if (n > most) most = n;
    }
    if (key_table_init(table, most)) {
        key_table_free(table);
        return -1;
    }
    return 0;
}

/* The lines (split at runs of "\n") or paragraphs (split at runs of two "\n" or more and at each
 * NUL) of data[start, end), counted into *n, those equal to an earlier one into *dup and their
 * code points into *dup_chars; table: cleared for up to `most` elements. */
static void count_duplicates(const uint8_t *data, int64_t start, int64_t end, int paragraphs,
                             int64_t most, KeyTable *table, int64_t *n, int64_t *dup,
                             int64_t *dup_chars) {
    key_table_reset(table, most);
    *n = *dup = *dup_chars = 0;
    int64_t nul = paragraphs ? next_byte(data, start, end, 0) : end;
    for (int64_t element = start, search = start;;) {
        int64_t at = next_byte(data, search, end, '\n'), after;
        if (paragraphs && at + 1 < end && data[at + 1] != '\n' && at < nul) {
            search = at + 1; /* a single newline inside a paragraph */
            continue;
        }
        if (nul < at) { /* a paragraph's NUL */
            at = nul;
            after = at + 1;
            nul = next_byte(data, after, end, 0);
        } else {
            after = at;
            while (after < end && data[after] == '\n') after++;
            if (paragraphs && after - at == 1 && after < end) {
                search = after;
                continue;
            }
        }
        uint64_t key = hash_bytes(data + element, at - element);
        int64_t slot = key_slot(table, key);
        if (table->counts[slot]) {
            (*dup)++;
            *dup_chars += code_points(data, element, at);
        } else {
            table->keys[slot] = key;
        }
        table->counts[slot]++;
        (*n)++;
        if (at >= end) break;
        element = search = after;
    }
}

/* Gopher repetition's element statistics of each text: lines (split at runs of "\n") and
 * paragraphs (the text stripped of \s, split at runs of two "\n" or more and at each NUL), their
 * numbers, those repeating an earlier one of the text, and the code points of those. Returns 0,
 * or -1 when out of memory. */
int element_duplicates(const uint8_t *data, const int64_t *offsets, int64_t n_docs,
                       const uint8_t *classes, int64_t *para_n, int64_t *para_dup,
                       int64_t *para_dup_chars, int64_t *line_n, int64_t *line_dup,
                       int64_t *line_dup_chars) {
    KeyTable table;
    if (key_table_for_texts(&table, data, offsets, n_docs, 1)) return -1;
    for (int64_t d = 0; d < n_docs; d++) {
        int64_t start = offsets[d], end = offsets[d + 1];
        int64_t elements = elements_at_most(data, start, end, 1);
        count_duplicates(data, start, end, 0, elements, &table, line_n + d, line_dup + d,
                         line_dup_chars + d);
        strip_spaces(data, &start, &end, classes);
        count_duplicates(data, start, end, 1, elements, &table, para_n + d, para_dup + d,
                         para_dup_chars + d);
    }
    key_table_free(&table);
    return 0;
}

/* Rust's char::is_whitespace (White_Space), what polars' str.strip_chars() strips: unlike \s,
 * not U+001C..U+001F. */
static int is_white_space(int32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* Whether data[start, end) holds a code point that is not white space. */
static int has_content(const uint8_t *data, int64_t start, int64_t end) {
    int size;
    for (int64_t i = start; i < end; i += size)
        if (!is_white_space(code_point_at(data, i, &size))) return 1;
    return 0;
}

/* Whether data[start, end) ends with one of the stop strings (UTF-8, stops[stop_offsets[k],
 * stop_offsets[k + 1]) each, none empty). */
static int ends_with_stop(const uint8_t *data, int64_t start, int64_t end, const uint8_t *stops,
                          const int64_t *stop_offsets, int64_t n_stops) {
    for (int64_t k = 0; k < n_stops; k++) {
        int64_t length = stop_offsets[k + 1] - stop_offsets[k];
        if (length <= end - start && data[end - 1] == stops[stop_offsets[k + 1] - 1] &&
            !memcmp(data + end - length, stops + stop_offsets[k], length))
            return 1;
    }
    return 0;
}

/* FineWeb quality's line counts of each text: its lines, split at each "\n" and not stripped,
 * that hold a code point other than white space (n_lines); of those, the ones ending with a
 * stop string (n_punct), of at most short_length code points (n_short), and the code points of
 * those equal to an earlier one of the text (dup_chars). stop_bytes: the UTF-8 bytes that end a
 * stop string (a line ending otherwise is not looked at further). Returns 0, or -1 when out of
 * memory. */
int fineweb_line_counts(const uint8_t *data, const int64_t *offsets, int64_t n_docs,
                        const uint8_t *stops, const int64_t *stop_offsets, int64_t n_stops,
                        const uint8_t *stop_bytes, int64_t short_length, int64_t *n_lines,
                        int64_t *n_punct, int64_t *n_short, int64_t *dup_chars) {
    KeyTable table;
    if (key_table_for_texts(&table, data, offsets, n_docs, 0)) return -1;
    for (int64_t d = 0; d < n_docs; d++) {
        int64_t start = offsets[d], end = offsets[d + 1];
        key_table_reset(&table, elements_at_most(data, start, end, 0));
        int64_t lines = 0, punct = 0, short_lines = 0, dup = 0;
        for (int64_t line = start;;) {
            int64_t stop = next_byte(data, line, end, '\n');
            if (has_content(data, line, stop)) {
                int64_t chars = code_points(data, line, stop);
                lines++;
                punct += stop_bytes[data[stop - 1]] &&
                         ends_with_stop(data, line, stop, stops, stop_offsets, n_stops);
                short_lines += chars <= short_length;
                uint64_t key = hash_bytes(data + line, stop - line);
                int64_t slot = key_slot(&table, key);
                if (table.counts[slot]) dup += chars;
                else table.keys[slot] = key;
                table.counts[slot]++;
            }
            if (stop >= end) break;
            line = stop + 1;
        }
        n_lines[d] = lines;
        n_punct[d] = punct;
        n_short[d] = short_lines;
        dup_chars[d] = dup;
    }
    key_table_free(&table);
    return 0;
}

/* UTF-8 of the code point c at out; its length. */
static int encode(int32_t c, uint8_t *out) {
    if (c < 0x80) {
        out[0] = (uint8_t)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (uint8_t)(0xC0 | (c >> 6));
        out[1] = (uint8_t)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (c >> 12));
        out[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (c >> 18));
    out[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (c & 0x3F));
    return 4;
}

static int is_line_break(int32_t c) { /* text.LINE_BREAKS, "\r\n" aside */
    if ((uint32_t)(c - 0x20) < 0x65) return 0; /* most: from " " to "\x84" */
    if (c < 0x20) return (c >= 0x0A && c <= 0x0D) || (c >= 0x1C && c <= 0x1E);
    return c == 0x85 || c == 0x2028 || c == 0x2029;
}

static int starts_with(const int32_t *cp, int64_t n, const char *ascii) {
    int64_t k = 0;
    for (; ascii[k]; k++)
        if (k >= n || cp[k] != ascii[k]) return 0;
    return 1;
}

/* c4.CITATION_PATTERN's match at cp[i] (\[\d*]|\[edit]|\[citation needed]): its length, or 0. */
static int64_t citation_at(const int32_t *cp, const uint8_t *kinds, int64_t n, int64_t i) {
    if (cp[i] != '[') return 0;
    int64_t j = i + 1;
    while (j < n && (kinds[j] & DIGIT)) j++;
    if (j < n && cp[j] == ']') return j + 1 - i;
    if (starts_with(cp + i, n - i, "[edit]")) return 6;
    if (starts_with(cp + i, n - i, "[citation needed]")) return 17;
    return 0;
}

/* A code point's ASCII lowercase; "k" for the Kelvin sign; 0x80 for any other (the only code
 * points outside ASCII whose lowercase holds an ASCII letter are the Kelvin sign and U+0130,
 * lowercased to "i" and a combining dot: no phrase ends with "i"). */
static uint8_t lowered(int32_t c) {
    if (c < 0x80) return (uint8_t)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return c == 0x212A ? 'k' : 0x80;
}

/* The ASCII phrases c4_measure looks for in a lowercased line, and, per byte, which of them
 * start with it. */
typedef struct {
    const char *text[32];
    int64_t length[32];
    int count;
    uint32_t starting[256];
    uint8_t pairs[65536 / 8]; /* a bit per pair of bytes that starts a phrase */
} Phrases;

/* phrases: each NUL-terminated, an empty one after the last (at most 32). */
static void phrases_init(Phrases *found, const char *phrases) {
    memset(found, 0, sizeof *found);
    for (; *phrases && found->count < 32; phrases += strlen(phrases) + 1) {
        found->text[found->count] = phrases;
        found->length[found->count] = (int64_t)strlen(phrases);
        found->starting[(uint8_t)phrases[0]] |= 1u << found->count;
        unsigned pair = (uint8_t)phrases[0] << 8 | (uint8_t)phrases[1];
        found->pairs[pair >> 3] |= 1 << (pair & 7);
        found->count++;
    }
}

/* Which phrases (a bit each) line[0, n), lowercased, holds; *curly: whether it holds "{". */
static uint32_t phrases_in(const int32_t *line, int64_t n, const Phrases *phrases, int *curly) {
    uint32_t found = 0;
    *curly = 0;
    uint8_t next = n ? lowered(line[0]) : 0;
    for (int64_t k = 0; k < n; k++) {
        uint8_t c = next;
        next = k + 1 < n ? lowered(line[k + 1]) : 0;
        *curly |= c == '{';
        unsigned pair = c << 8 | next;
        if (!(phrases->pairs[pair >> 3] & (1 << (pair & 7)))) continue;
        for (uint32_t maybe = phrases->starting[c] & ~found; maybe; maybe &= maybe - 1) {
            int which = __builtin_ctz(maybe);
            int64_t length = phrases->length[which], j = 1;
            if (k + length > n) continue;
            while (j < length && lowered(line[k + j]) == (uint8_t)phrases->text[which][j]) j++;
            if (j == length) found |= 1u << which;
        }
    }
    return found;
}

enum { C4_FATAL_LOREM = 1, C4_FATAL_CURLY = 2 };
/* settings of c4_measure, in order */
enum {
    C4_MAX_WORD_LENGTH, C4_MIN_WORDS, C4_CITATIONS, C4_TERMINAL_PUNCT, C4_LOREM, C4_JAVASCRIPT,
    C4_CURLY, C4_POLICY, C4_COUNTING
};

/* c4.C4QualityFilter.measure, a text at a time: its lines (str.splitlines(), stripped) judged
 * by the line rules (see C4QualityFilter; phrase_list: "lorem ipsum", "javascript", then the
 * policies, each NUL-terminated, an empty one after the last), the kept ones, citations
 * removed, joined by "\n" and stripped into text_out (text_offsets: n_docs + 1), fatal
 * (C4_FATAL_LOREM, C4_FATAL_CURLY or 0: the first line's that has one), sentences of the kept
 * lines, the numbers of the removed lines into removed (removed_counts per text; room for
 * removed_capacity), and, with C4_COUNTING, lost_words: the words (split_words) of the removed
 * lines and of the citations removed, -1 where the text holds U+001C..U+001E (line breaks
 * within a word). Returns the removed lines' number, -1 when out of memory, -2 - (that number)
 * when it is more than removed_capacity. With removed_given (removed_given_offsets: n_docs + 1,
 * into it), the lines are not judged: those it numbers (in order) are removed, the others kept;
 * fatal is -1 for a text whose numbers pass its last line. */
int64_t c4_measure(const uint8_t *data, const int64_t *offsets, int64_t n_docs,
                   const uint8_t *classes, const int32_t *abbreviations, const int64_t *lengths,
                   int64_t n_abbr, int64_t abbr_width, const int64_t *settings,
                   const char *phrase_list, const uint32_t *removed_given,
                   const int64_t *removed_given_offsets, uint8_t *text_out,
                   int64_t *text_offsets, int8_t *fatal, int64_t *sentences, int64_t *lost_words,
                   uint32_t *removed, int64_t removed_capacity, int64_t *removed_counts) {
    int64_t longest = longest_text(offsets, n_docs);
    int64_t room = longest + 1;
    int32_t *cp = malloc(4 * room * sizeof(int32_t)); /* the text, a line, scratch, kept lines */
    uint8_t *kinds = malloc(4 * room);
    if (!cp || !kinds) {
        free(cp);
        free(kinds);
        return -1;
    }
    int32_t *cited = cp + room, *scratch = cp + 2 * room, *kept = cp + 3 * room;
    uint8_t *cited_kinds = kinds + room, *scratch_kinds = kinds + 2 * room;
    uint8_t *kept_kinds = kinds + 3 * room;
    Phrases phrases;
    phrases_init(&phrases, phrase_list);
    const int64_t max_word = settings[C4_MAX_WORD_LENGTH], min_words = settings[C4_MIN_WORDS];
    int64_t total_removed = 0, written = 0;
    text_offsets[0] = 0;
    for (int64_t d = 0; d < n_docs; d++) {
        int64_t n = decode(data, offsets[d], offsets[d + 1], cp, kinds, classes);
        int64_t n_kept = 0, kept_lines = 0, doc_sentences = 0, lost = 0, number = 0;
        int doc_fatal = 0, unsplit = 0;
        int64_t g = removed_given ? removed_given_offsets[d] : 0;
        int64_t g_end = removed_given ? removed_given_offsets[d + 1] : 0;
        removed_counts[d] = 0;
        for (int64_t a = 0; a < n; number++) {
            int64_t b = a;
            while (b < n && !is_line_break(cp[b])) b++;
            int64_t next = b < n && cp[b] == '\r' && b + 1 < n && cp[b + 1] == '\n' ? b + 2 : b + 1;
            if (b < n && cp[b] >= 0x1C && cp[b] <= 0x1E) unsplit = 1;
            while (a < b && (kinds[a] & SPACE)) a++; /* the line [a, b), stripped */
            while (b > a && (kinds[b - 1] & SPACE)) b--;
            int valid = 1, stored_keep = 1;
            if (removed_given) { /* the stored numbers of the lines to remove say */
                stored_keep = !(g < g_end && removed_given[g] == number);
                g += !stored_keep;
                valid = 0;
            }
            if (valid && max_word != -1 && b - a > max_word) {
                for (int64_t k = a, run = 0; k < b && valid; k++)
                    if ((kinds[k] & SPACE) ? (run = 0) : ++run > max_word) valid = 0;
            }
            if (valid && min_words > 0) {
                int64_t found = 0;
                for (int64_t k = a; k < b && found < min_words; k++)
                    found += !(kinds[k] & SPACE) && (k == a || (kinds[k - 1] & SPACE));
                valid = found >= min_words;
            }
            int32_t *line = cp + a; /* the line without citations */
            uint8_t *line_kinds = kinds + a;
            int64_t m = b - a;
            if (settings[C4_CITATIONS] && (valid || (removed_given && stored_keep))) {
                int64_t k = a;
                while (k < b && (cp[k] != '[' || !citation_at(cp, kinds, b, k))) k++;
                if (k < b) {
                    line = cited;
                    line_kinds = cited_kinds;
                    m = k - a;
                    memcpy(line, cp + a, m * sizeof(int32_t));
                    memcpy(line_kinds, kinds + a, m);
                    while (k < b) {
                        int64_t cut = citation_at(cp, kinds, b, k);
                        if (cut) {
                            k += cut;
                            continue;
                        }
                        line[m] = cp[k];
                        line_kinds[m++] = kinds[k++];
                    }
                }
            }
            if (valid && settings[C4_TERMINAL_PUNCT])
                valid = m > 0 && is_one_of(line[m - 1], ".?!\"'") &&
                        !(m >= 3 && line[m - 1] == DOT && line[m - 2] == DOT && line[m - 3] == DOT);
            int line_fatal = 0, keep = 0;
            if (valid) {
                int curly;
                uint32_t found = phrases_in(line, m, &phrases, &curly);
                int lorem = settings[C4_LOREM] && (found & 1);
                int javascript = settings[C4_JAVASCRIPT] && (found & 2);
                curly = settings[C4_CURLY] && !javascript && curly;
                int policy = settings[C4_POLICY] && (found >> 2);
                line_fatal = lorem ? C4_FATAL_LOREM : curly ? C4_FATAL_CURLY : 0;
                keep = !lorem && !javascript && !curly && !policy;
            }
            if (removed_given) keep = stored_keep;
            if (line_fatal && !doc_fatal) doc_fatal = line_fatal;
            if (keep) {
                if (kept_lines++) {
                    kept[n_kept] = '\n';
                    kept_kinds[n_kept++] = classes['\n'];
                }
                memcpy(kept + n_kept, line, m * sizeof(int32_t));
                memcpy(kept_kinds + n_kept, line_kinds, m);
                n_kept += m;
                if (!removed_given)
                    doc_sentences += sentences_in(line, line_kinds, m, scratch, scratch_kinds,
                                                  abbreviations, lengths, n_abbr, abbr_width);
                if (settings[C4_COUNTING] && m < b - a)
                    lost += words_in(cp + a, kinds + a, b - a, classes, abbreviations, lengths,
                                     n_abbr, abbr_width, NULL, NULL, NULL) -
                            words_in(line, line_kinds, m, classes, abbreviations, lengths, n_abbr,
                                     abbr_width, NULL, NULL, NULL);
            } else {
                if (total_removed < removed_capacity) removed[total_removed] = (uint32_t)number;
                total_removed++;
                removed_counts[d]++;
                if (settings[C4_COUNTING])
                    lost += words_in(cp + a, kinds + a, b - a, classes, abbreviations, lengths,
                                     n_abbr, abbr_width, NULL, NULL, NULL);
            }
            a = next;
        }
        int64_t first = 0, last = n_kept; /* "\n".join(kept lines).strip() */
        while (first < last && (kept_kinds[first] & SPACE)) first++;
        while (last > first && (kept_kinds[last - 1] & SPACE)) last--;
        for (int64_t k = first; k < last; k++) written += encode(kept[k], text_out + written);
        text_offsets[d + 1] = written;
        fatal[d] = (int8_t)(removed_given && g < g_end ? -1 : doc_fatal);
        sentences[d] = doc_sentences;
        lost_words[d] = unsplit ? -1 : lost;
    }
    free(cp);
    free(kinds);
    return total_removed > removed_capacity ? -2 - total_removed : total_removed;
}
