/* The words of a text that could be facts, as the retention metric defines words and facts, in one
 * pass without the intermediate strings.
 *
 * The Python definition (hermeslab.eval.metrics._words) turns the separator characters into
 * spaces, then in three passes turns ". ", ", " and ": " into spaces (in that order, each pass
 * reading the result of the one before), strips ".,:" from the end and splits at whitespace.
 * Read from the right, each position's fate depends only on the positions after it, so one
 * right-to-left walk knows, for the next position, whether it is a space after the translation
 * (t0) and after the first and second passes (t1, t2), and emits every word it closes.
 *
 * A word of ASCII letters that are lower case after the first one ("value", "Value") is never a
 * fact (the entity extractor needs a digit, a separator or an inner capital), and most words of
 * prose and code are such words: they are skipped before a string is made for them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* What a character is to the definition, as bits. SPACE: a space once translated (the separators,
 * line breaks, tabs and the space itself); OTHER_SPACE: whitespace that str.split() breaks at but
 * the translation leaves alone; DOT, COMMA, COLON: the clause ends; LOWER: a-z; LETTER: A-Z, a-z. */
enum { SPACE = 1, OTHER_SPACE = 2, DOT = 4, COMMA = 8, COLON = 16, LOWER = 32, LETTER = 64 };

static unsigned char latin1_class[256];

static void
fill_latin1_class(void)
{
    for (const char *c = "\"'`()[]{}<>;=|!?*\\\n\r\t "; *c; c++)
        latin1_class[(unsigned char)*c] = SPACE;
    for (int c = 0; c < 256; c++)
        if (latin1_class[c] == 0 && Py_UNICODE_ISSPACE(c))
            latin1_class[c] = OTHER_SPACE;
    latin1_class['.'] = DOT;
    latin1_class[','] = COMMA;
    latin1_class[':'] = COLON;
    for (int c = 'a'; c <= 'z'; c++) {
        latin1_class[c] = LOWER | LETTER;
        latin1_class[c - 'a' + 'A'] = LETTER;
    }
}

static inline unsigned char
class_of(Py_UCS4 c)
{
    if (c < 256)
        return latin1_class[c];
    return Py_UNICODE_ISSPACE(c) ? OTHER_SPACE : 0;
}

/* Adds text[start:end] to words; -1 on error. */
static int
add_word(PyObject *text, PyObject *words, Py_ssize_t start, Py_ssize_t end)
{
    PyObject *word = PyUnicode_Substring(text, start, end);
    if (word == NULL)
        return -1;
    int failed = PySet_Add(words, word);
    Py_DECREF(word);
    return failed;
}

/* The walk, written once per character width. A word ends (reading leftwards) at a break or at
 * the text's start; it is plain when all but its first character are a-z and the first is a
 * letter. */
#define DEFINE_SCAN(NAME, CHAR)                                                                     \
    static int NAME(PyObject *text, const CHAR *data, Py_ssize_t size, PyObject *words)            \
    {                                                                                               \
        int t0 = 0, t1 = 0, t2 = 0; /* the next position: a space after translation, pass 1, 2 */  \
        int stripping = 1;          /* inside the trailing ".,:" that rstrip removes */            \
        Py_ssize_t word_end = -1;   /* one past the word being read, or -1 */                      \
        int lower = 1, lower_after_first = 1;                                                       \
        for (Py_ssize_t j = size - 1; j >= 0; j--) {                                                \
            unsigned char cls = class_of(data[j]);                                                  \
            int s0 = (cls & SPACE) != 0;                                                            \
            int s1 = s0 | (t0 & ((cls & DOT) != 0));                                                \
            int s2 = s1 | (t1 & ((cls & COMMA) != 0));                                              \
            int s3 = s2 | (t2 & ((cls & COLON) != 0));                                              \
            t0 = s0, t1 = s1, t2 = s2;                                                              \
            int brk = s3 | ((cls & OTHER_SPACE) != 0);                                              \
            if (stripping) {                                                                        \
                if (!brk && (cls & (DOT | COMMA | COLON)))                                          \
                    continue; /* stripped: neither a word character nor a break */                  \
                stripping = 0;                                                                      \
            }                                                                                       \
            if (!brk) {                                                                             \
                if (word_end < 0) {                                                                 \
                    word_end = j + 1;                                                               \
                    lower = 1;                                                                      \
                }                                                                                   \
                lower_after_first = lower;                                                          \
                lower &= (cls & LOWER) != 0;                                                        \
            }                                                                                       \
            else if (word_end >= 0) {                                                               \
                int plain = lower_after_first && (class_of(data[j + 1]) & LETTER);                  \
                if (!plain && add_word(text, words, j + 1, word_end) < 0)                           \
                    return -1;                                                                      \
                word_end = -1;                                                                      \
            }                                                                                       \
        }                                                                                           \
        if (word_end >= 0 && !(lower_after_first && (class_of(data[0]) & LETTER)))                 \
            return add_word(text, words, 0, word_end);                                              \
        return 0;                                                                                   \
    }

DEFINE_SCAN(scan_ucs1, Py_UCS1)
DEFINE_SCAN(scan_ucs2, Py_UCS2)
DEFINE_SCAN(scan_ucs4, Py_UCS4)

static PyObject *
candidate_words(PyObject *module, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "candidate_words() needs a str, got %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    PyObject *words = PyFrozenSet_New(NULL);
    if (words == NULL)
        return NULL;
    Py_ssize_t size = PyUnicode_GET_LENGTH(text);
    int failed;
    switch (PyUnicode_KIND(text)) {
    case PyUnicode_1BYTE_KIND:
        failed = scan_ucs1(text, PyUnicode_1BYTE_DATA(text), size, words);
        break;
    case PyUnicode_2BYTE_KIND:
        failed = scan_ucs2(text, PyUnicode_2BYTE_DATA(text), size, words);
        break;
    default:
        failed = scan_ucs4(text, PyUnicode_4BYTE_DATA(text), size, words);
        break;
    }
    if (failed) {
        Py_DECREF(words);
        return NULL;
    }
    return words;
}

static PyMethodDef methods[] = {
    {"candidate_words", candidate_words, METH_O,
     "The distinct words of a text (hermeslab.eval.metrics._words) but those of lower-case ASCII letters after "
     "the first, which are never facts, as a frozenset."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "hermeslab.eval._factwords",
    "The retention metric's candidate facts, found in one pass.", -1, methods,
};

PyMODINIT_FUNC
PyInit__factwords(void)
{
    fill_latin1_class();
    return PyModule_Create(&module);
}
