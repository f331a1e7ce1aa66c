/* Lengths of repr() without building the repr.
 *
 * Hermes's whole-list estimate is len(str(messages)) / 4; hermeslab emulates it message by
 * message, and writing out the reprs is most of its cost. For an ASCII text the repr is its
 * characters between two quotes, with a backslash, tab, newline and carriage return written as
 * two characters, another control character (below 0x20, or 0x7f) as four (\xNN), and the quote
 * itself as two: a single quote, unless the text has single quotes and no double ones (the repr is
 * then double-quoted and nothing is escaped for it). A dict's repr is its items' reprs as
 * "key: value" between braces, a list's its items' between brackets, both joined by ", ", and a
 * container met again inside itself is written "{...}" or "[...]". Anything else (non-ASCII text,
 * numbers, subclasses with their own repr) is measured by calling repr().
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* ascii_size for a short text (a key, a role, an id): one look at each byte, no table to clear (the
 * histogram's fixed cost is worth it from about 64 bytes on). */
static Py_ssize_t
short_ascii_size(const unsigned char *data, Py_ssize_t size, Py_ssize_t *newlines_out)
{
    Py_ssize_t newlines = 0, singles = 0, doubles = 0, two = 0, four = 0;
    for (Py_ssize_t i = 0; i < size; i++) {
        unsigned char c = data[i];
        if (c >= 0x20 && c != '\\' && c != '\'' && c != '"' && c != 0x7f)
            continue;
        if (c == '\'')
            singles++;
        else if (c == '"')
            doubles++;
        else if (c == '\n')
            newlines++, two++;
        else if (c == '\\' || c == '\t' || c == '\r')
            two++;
        else
            four++;
    }
    if (newlines_out != NULL)
        *newlines_out = newlines;
    return size + 2 + two + 3 * four + ((singles && !doubles) ? 0 : singles);
}

/* len(repr(text)) of an ASCII text's bytes, and its newlines. */
static Py_ssize_t
ascii_size(const unsigned char *data, Py_ssize_t size, Py_ssize_t *newlines_out)
{
    if (size < 64)
        return short_ascii_size(data, size, newlines_out);
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
    if (newlines_out != NULL)
        *newlines_out = newlines;
    return size + 2 + two + 3 * four + escaped_quotes;
}

static PyObject *
ascii_repr_length(PyObject *module, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "ascii_repr_length() needs a str, got %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(text))
        Py_RETURN_NONE; /* the caller takes repr() itself */
    Py_ssize_t newlines;
    Py_ssize_t size = ascii_size(PyUnicode_1BYTE_DATA(text), PyUnicode_GET_LENGTH(text), &newlines);
    return Py_BuildValue("(nn)", size, newlines);
}

static Py_ssize_t length_of(PyObject *obj);

/* len(repr(obj)) by calling repr(): -1 on error. */
static Py_ssize_t
length_by_repr(PyObject *obj)
{
    PyObject *text = PyObject_Repr(obj);
    if (text == NULL)
        return -1;
    Py_ssize_t size = PyUnicode_GET_LENGTH(text);
    Py_DECREF(text);
    return size;
}

/* A list's or dict's items, measured as its repr writes them; -1 on error. */
static Py_ssize_t
container_length(PyObject *obj)
{
    int is_dict = PyDict_CheckExact(obj);
    int entered = Py_ReprEnter(obj);
    if (entered != 0)
        return entered > 0 ? 5 : -1; /* "{...}" or "[...]" */
    Py_ssize_t total = 2, items = 0;
    if (is_dict) {
        Py_ssize_t position = 0;
        PyObject *key, *value;
        while (PyDict_Next(obj, &position, &key, &value)) {
            Py_INCREF(key);
            Py_INCREF(value);
            Py_ssize_t key_size = length_of(key);
            Py_ssize_t value_size = key_size < 0 ? -1 : length_of(value);
            Py_DECREF(key);
            Py_DECREF(value);
            if (value_size < 0) {
                total = -1;
                break;
            }
            total += key_size + 2 + value_size;
            items++;
        }
    }
    else {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(obj); i++) {
            PyObject *item = PyList_GET_ITEM(obj, i);
            Py_INCREF(item);
            Py_ssize_t size = length_of(item);
            Py_DECREF(item);
            if (size < 0) {
                total = -1;
                break;
            }
            total += size;
            items++;
        }
    }
    Py_ReprLeave(obj);
    if (total >= 0 && items > 1)
        total += 2 * (items - 1);
    return total;
}

static Py_ssize_t
length_of(PyObject *obj)
{
    if (PyUnicode_CheckExact(obj) && PyUnicode_IS_ASCII(obj))
        return ascii_size(PyUnicode_1BYTE_DATA(obj), PyUnicode_GET_LENGTH(obj), NULL);
    if (obj == Py_None || obj == Py_True)
        return 4;
    if (obj == Py_False)
        return 5;
    if (PyDict_CheckExact(obj) || PyList_CheckExact(obj)) {
        if (Py_EnterRecursiveCall(" while measuring a repr"))
            return -1;
        Py_ssize_t size = container_length(obj);
        Py_LeaveRecursiveCall();
        return size;
    }
    return length_by_repr(obj);
}

static PyObject *
repr_length(PyObject *module, PyObject *obj)
{
    Py_ssize_t size = length_of(obj);
    return size < 0 ? NULL : PyLong_FromSsize_t(size);
}

static PyMethodDef methods[] = {
    {"ascii_repr_length", ascii_repr_length, METH_O,
     "(len(repr(text)), newlines) of an ASCII str, or None for any other text."},
    {"repr_length", repr_length, METH_O, "len(repr(obj)), without writing out the ASCII texts, dicts and lists."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "hermeslab.core._reprlen",
    "Lengths of repr(), counted without building the repr.", -1, methods,
};

PyMODINIT_FUNC
PyInit__reprlen(void)
{
    return PyModule_Create(&module);
}
