/* The length of repr() of an ASCII str, and its newlines, in one pass without building the repr.
 *
 * Hermes's whole-list estimate is len(str(messages)) / 4; hermeslab emulates it message by
 * message, and the repr of the long tool outputs is most of its cost. For an ASCII text the repr
 * is its characters between two quotes, with a backslash, tab, newline and carriage return
 * written as two characters, another control character (below 0x20, or 0x7f) as four (\xNN), and
 * the quote itself as two: a single quote, unless the text has single quotes and no double ones
 * (the repr is then double-quoted and nothing is escaped for it).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static PyObject *
ascii_repr_length(PyObject *module, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "ascii_repr_length() needs a str, got %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(text))
        Py_RETURN_NONE; /* the caller takes repr() itself */
    const unsigned char *data = PyUnicode_1BYTE_DATA(text);
    Py_ssize_t size = PyUnicode_GET_LENGTH(text);
    /* A histogram of the bytes, in four interleaved copies so repeated bytes do not wait on one counter. */
    Py_ssize_t counts[4][128];
    memset(counts, 0, sizeof counts);
    Py_ssize_t i = 0;
    for (; i + 4 <= size; i += 4) {
        counts[0][data[i]]++;
        counts[1][data[i + 1]]++;
        counts[2][data[i + 2]]++;
        counts[3][data[i + 3]]++;
    }
    for (; i < size; i++)
        counts[0][data[i]]++;
    Py_ssize_t of[128];
    for (int c = 0; c < 128; c++)
        of[c] = counts[0][c] + counts[1][c] + counts[2][c] + counts[3][c];
    Py_ssize_t newlines = of['\n'], singles = of['\''], doubles = of['"'];
    Py_ssize_t two = newlines + of['\\'] + of['\t'] + of['\r'];
    Py_ssize_t four = of[0x7f];
    for (int c = 0; c < 0x20; c++)
        four += of[c];
    four -= of['\n'] + of['\t'] + of['\r'];
    Py_ssize_t escaped_quotes = (singles && !doubles) ? 0 : singles;
    return Py_BuildValue("(nn)", size + 2 + two + 3 * four + escaped_quotes, newlines);
}

static PyMethodDef methods[] = {
    {"ascii_repr_length", ascii_repr_length, METH_O,
     "(len(repr(text)), newlines) of an ASCII str, or None for any other text."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "hermeslab.core._reprlen",
    "The repr length of an ASCII text and its newlines, counted in one pass.", -1, methods,
};

PyMODINIT_FUNC
PyInit__reprlen(void)
{
    return PyModule_Create(&module);
}
