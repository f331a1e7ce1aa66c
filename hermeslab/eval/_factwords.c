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

enum { PLAIN = 0, SPACE = 1, OTHER_SPACE = 2 };

/* SPACE: a space once translated (the separators, line breaks, tabs and the space itself);
 * OTHER_SPACE: whitespace that str.split() breaks at but the translation leaves alone. */
static unsigned char ascii_class[128];

static void
fill_ascii_class(void)
{
    const char *separators = "\"'`()[]{}<>;=|!?*\\\n\r\t ";
    for (const char *c = separators; *c; c++)
        ascii_class[(unsigned char)*c] = SPACE;
    for (int c = 0; c < 128; c++)
        if (ascii_class[c] == PLAIN && Py_UNICODE_ISSPACE(c))
            ascii_class[c] = OTHER_SPACE;
}

static PyObject *
candidate_words(PyObject *module, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "candidate_words() needs a str, got %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t size = PyUnicode_GET_LENGTH(text);
    PyObject *words = PyFrozenSet_New(NULL);
    if (words == NULL)
        return NULL;
    int t0 = 0, t1 = 0, t2 = 0; /* the next position: a space after the translation, pass 1, pass 2 */
    int stripping = 1;             /* still inside the trailing ".,:" that rstrip removes */
    Py_ssize_t word_end = -1;      /* one past the last character of the word being read, or -1 */
    int lower = 1, lower_after_first = 1; /* the word read so far is [a-z]*; so is all of it but its first */
    for (Py_ssize_t j = size - 1; j >= -1; j--) {
        Py_UCS4 c = 0;
        int brk = 1; /* before the first character: the first word ends */
        if (j >= 0) {
            c = PyUnicode_READ(kind, data, j);
            int cls = c < 128 ? ascii_class[c] : (Py_UNICODE_ISSPACE(c) ? OTHER_SPACE : PLAIN);
            int s0 = cls == SPACE;
            int s1 = s0 || (c == '.' && t0);
            int s2 = s1 || (c == ',' && t1);
            int s3 = s2 || (c == ':' && t2);
            t0 = s0, t1 = s1, t2 = s2;
            brk = s3 || cls == OTHER_SPACE;
            if (stripping) {
                if (!brk && (c == '.' || c == ',' || c == ':'))
                    continue; /* stripped: neither a word character nor a break */
                stripping = 0;
            }
        }
        if (brk) {
            Py_UCS4 first = word_end >= 0 ? PyUnicode_READ(kind, data, j + 1) : 0;
            int plain = lower_after_first && first < 128 && Py_ISALPHA(first);
            if (word_end >= 0 && !plain) {
                PyObject *word = PyUnicode_Substring(text, j + 1, word_end);
                if (word == NULL || PySet_Add(words, word) < 0) {
                    Py_XDECREF(word);
                    Py_DECREF(words);
                    return NULL;
                }
                Py_DECREF(word);
            }
            word_end = -1;
        }
        else {
            if (word_end < 0) {
                word_end = j + 1;
                lower = 1;
            }
            lower_after_first = lower;
            lower = lower && c >= 'a' && c <= 'z';
        }
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
    fill_ascii_class();
    return PyModule_Create(&module);
}
