/* Compiled twin of tracegrade.criteria.call_compare (its Python functions are the plain path and the reference;
 * tests/test_call_compare.py compares the two).
 *
 * The trajectory criterion compares the arguments of recorded and expected tool calls for every graded case.
 * Here argument values compare as JSON values (objects by keys and values, arrays element by element, numbers by
 * value, booleans never equal to numbers, strings never parsed) for the exact built-in types JSON decoders
 * produce; any other value (a subclass, a tuple, a mix of types) is handed to the Python comparison,
 * tracegrade.models.json_values.json_equal, so the two paths agree there by construction.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *json_equal_py;   /* tracegrade.models.json_values.json_equal */
static PyObject *str_name, *str_args, *str_args_captured;

static int values_equal(PyObject *a, PyObject *b);

/* values_equal on two borrowed items of containers, held while compared: a comparison handed to Python could
 * change either container and drop them */
static int
items_equal(PyObject *left, PyObject *right)
{
    Py_INCREF(left);
    Py_INCREF(right);
    int same = values_equal(left, right);
    Py_DECREF(left);
    Py_DECREF(right);
    return same;
}

static int
dicts_equal(PyObject *a, PyObject *b)
{
    if (PyDict_GET_SIZE(a) != PyDict_GET_SIZE(b)) {
        return 0;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(a, &pos, &key, &value)) {
        PyObject *other = PyDict_GetItemWithError(b, key);
        if (other == NULL) {
            return PyErr_Occurred() ? -1 : 0;
        }
        int same = items_equal(value, other);
        if (same != 1) {
            return same;
        }
    }
    return 1;
}

static int
lists_equal(PyObject *a, PyObject *b)
{
    if (PyList_GET_SIZE(a) != PyList_GET_SIZE(b)) {
        return 0;
    }
    /* the sizes are read again on every step: a comparison handed to Python could change either list */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(a) && i < PyList_GET_SIZE(b); i++) {
        int same = items_equal(PyList_GET_ITEM(a, i), PyList_GET_ITEM(b, i));
        if (same != 1) {
            return same;
        }
    }
    return PyList_GET_SIZE(a) == PyList_GET_SIZE(b);
}

static int
python_json_equal(PyObject *a, PyObject *b)
{
    PyObject *answer = PyObject_CallFunctionObjArgs(json_equal_py, a, b, NULL);
    if (answer == NULL) {
        return -1;
    }
    int same = PyObject_IsTrue(answer);
    Py_DECREF(answer);
    return same;
}

/* 1 equal, 0 not, -1 error (an exception is set) */
static int
values_equal(PyObject *a, PyObject *b)
{
    PyTypeObject *kind = Py_TYPE(a);
    if (kind != Py_TYPE(b)) {
        return python_json_equal(a, b);
    }
    if (kind == &PyUnicode_Type || kind == &PyLong_Type || kind == &PyBool_Type || a == Py_None) {
        return PyObject_RichCompareBool(a, b, Py_EQ);  /* identity implies equality for these types */
    }
    if (kind == &PyFloat_Type) {
        return PyFloat_AS_DOUBLE(a) == PyFloat_AS_DOUBLE(b);  /* NaN equals nothing, itself included */
    }
    if (kind != &PyDict_Type && kind != &PyList_Type) {
        return python_json_equal(a, b);
    }
    if (Py_EnterRecursiveCall(" while comparing JSON values")) {
        return -1;
    }
    int same = kind == &PyDict_Type ? dicts_equal(a, b) : lists_equal(a, b);
    Py_LeaveRecursiveCall();
    return same;
}

/* arguments_satisfy(actual, expected): nothing expected is satisfied by any arguments, else the arguments must be
 * known (not None) and equal as JSON values */
static int
satisfies(PyObject *actual, PyObject *expected)
{
    int wanted = PyObject_IsTrue(expected);
    if (wanted != 1) {
        return wanted < 0 ? -1 : 1;
    }
    return actual == Py_None ? 0 : values_equal(actual, expected);
}

/* Is an actual call in place of the expected one: captured arguments, the same name, arguments that satisfy it? */
static int
call_in_place(PyObject *actual, PyObject *expected)
{
    int same = -1;
    PyObject *captured = NULL, *actual_name = NULL, *expected_name = NULL, *expected_args = NULL, *actual_args = NULL;
    if (!(captured = PyObject_GetAttr(actual, str_args_captured))) {
        goto done;
    }
    same = PyObject_IsTrue(captured);
    if (same != 1) {
        goto done;
    }
    same = -1;
    if (!(actual_name = PyObject_GetAttr(actual, str_name)) ||
        !(expected_name = PyObject_GetAttr(expected, str_name))) {
        goto done;
    }
    same = PyObject_RichCompareBool(actual_name, expected_name, Py_EQ);
    if (same != 1) {
        goto done;
    }
    same = -1;
    if (!(expected_args = PyObject_GetAttr(expected, str_args)) ||
        !(actual_args = PyObject_GetAttr(actual, str_args))) {
        goto done;
    }
    same = satisfies(actual_args, expected_args);
done:
    Py_XDECREF(captured);
    Py_XDECREF(actual_name);
    Py_XDECREF(expected_name);
    Py_XDECREF(expected_args);
    Py_XDECREF(actual_args);
    return same;
}

static PyObject *
arguments_satisfy(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "arguments_satisfy() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    int same = satisfies(args[0], args[1]);
    return same < 0 ? NULL : PyBool_FromLong(same);
}

static PyObject *
calls_satisfy_in_place(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "calls_satisfy_in_place() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *actual = PySequence_Fast(args[0], "calls_satisfy_in_place: the actual calls must be a sequence");
    if (actual == NULL) {
        return NULL;
    }
    PyObject *expected = PySequence_Fast(args[1], "calls_satisfy_in_place: the expected calls must be a sequence");
    if (expected == NULL) {
        Py_DECREF(actual);
        return NULL;
    }
    int same = PySequence_Fast_GET_SIZE(actual) == PySequence_Fast_GET_SIZE(expected);
    for (Py_ssize_t i = 0; same == 1 && i < PySequence_Fast_GET_SIZE(actual) && i < PySequence_Fast_GET_SIZE(expected);
         i++) {
        same = call_in_place(PySequence_Fast_GET_ITEM(actual, i), PySequence_Fast_GET_ITEM(expected, i));
    }
    Py_DECREF(actual);
    Py_DECREF(expected);
    return same < 0 ? NULL : PyBool_FromLong(same);
}

static PyObject *
json_equal(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "json_equal() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    int same = values_equal(args[0], args[1]);
    return same < 0 ? NULL : PyBool_FromLong(same);
}

/* The actual indices of each name, as lists in a dict: name -> [j, ...] ascending */
static PyObject *
positions_by_name(PyObject *names)
{
    PyObject *by_name = PyDict_New();
    for (Py_ssize_t j = 0; by_name != NULL && j < PyTuple_GET_SIZE(names); j++) {
        PyObject *name = PyTuple_GET_ITEM(names, j);
        PyObject *found = PyDict_GetItemWithError(by_name, name);
        PyObject *index = PyLong_FromSsize_t(j);
        int failed = index == NULL || (found == NULL && PyErr_Occurred());
        if (!failed && found == NULL) {
            found = PyList_New(0);
            failed = found == NULL || PyDict_SetItem(by_name, name, found) < 0;
            Py_XDECREF(found); /* the dict holds it */
        }
        failed = failed || PyList_Append(found, index) < 0;
        Py_XDECREF(index);
        if (failed) {
            Py_CLEAR(by_name);
        }
    }
    return by_name;
}

/* For each expected call i, the actual indices j (ascending) of the same name whose arguments satisfy it. The
 * arguments are tuples, so a comparison handed to Python cannot change them under the loop. */
static PyObject *
satisfying_positions_of(PyObject *expected_names, PyObject *actual_names, PyObject *expected_args,
                        PyObject *actual_args)
{
    Py_ssize_t n = PyTuple_GET_SIZE(expected_names);
    if (PyTuple_GET_SIZE(expected_args) != n || PyTuple_GET_SIZE(actual_args) != PyTuple_GET_SIZE(actual_names)) {
        PyErr_SetString(PyExc_ValueError, "satisfying_positions needs one name and one argument value per call");
        return NULL;
    }
    PyObject *by_name = positions_by_name(actual_names);
    PyObject *table = by_name == NULL ? NULL : PyList_New(n);
    for (Py_ssize_t i = 0; table != NULL && i < n; i++) {
        PyObject *row = PyList_New(0);
        PyObject *candidates = row == NULL ? NULL : PyDict_GetItemWithError(by_name, PyTuple_GET_ITEM(expected_names, i));
        int failed = row == NULL || (candidates == NULL && PyErr_Occurred());
        for (Py_ssize_t k = 0; !failed && candidates != NULL && k < PyList_GET_SIZE(candidates); k++) {
            PyObject *index = PyList_GET_ITEM(candidates, k);
            int same = satisfies(PyTuple_GET_ITEM(actual_args, PyLong_AsSsize_t(index)), PyTuple_GET_ITEM(expected_args, i));
            failed = same < 0 || (same == 1 && PyList_Append(row, index) < 0);
        }
        if (failed) {
            Py_XDECREF(row);
            Py_CLEAR(table);
        }
        else {
            PyList_SET_ITEM(table, i, row);
        }
    }
    Py_XDECREF(by_name);
    return table;
}

static PyObject *
satisfying_positions(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "satisfying_positions() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *tuples[4] = {NULL, NULL, NULL, NULL};
    PyObject *table = NULL;
    int k = 0;
    while (k < 4 && (tuples[k] = PySequence_Tuple(args[k])) != NULL) {
        k++;
    }
    if (k == 4) {
        table = satisfying_positions_of(tuples[0], tuples[1], tuples[2], tuples[3]);
    }
    for (k = 0; k < 4; k++) {
        Py_XDECREF(tuples[k]);
    }
    return table;
}

static PyMethodDef methods[] = {
    {"arguments_satisfy", (PyCFunction)(void (*)(void))arguments_satisfy, METH_FASTCALL,
     "arguments_satisfy(actual_args, expected_args) -> bool\n\n"
     "The compiled twin of tracegrade.models.json_values.arguments_satisfy."},
    {"calls_satisfy_in_place", (PyCFunction)(void (*)(void))calls_satisfy_in_place, METH_FASTCALL,
     "calls_satisfy_in_place(actual_calls, expected_calls) -> bool\n\n"
     "The compiled twin of tracegrade.criteria.call_compare.plain_calls_satisfy_in_place."},
    {"json_equal", (PyCFunction)(void (*)(void))json_equal, METH_FASTCALL,
     "json_equal(a, b) -> bool\n\nThe compiled twin of tracegrade.models.json_values.json_equal."},
    {"satisfying_positions", (PyCFunction)(void (*)(void))satisfying_positions, METH_FASTCALL,
     "satisfying_positions(expected_names, actual_names, expected_args, actual_args) -> list[list[int]]\n\n"
     "The compiled twin of tracegrade.criteria.call_compare.plain_satisfying_positions."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "tracegrade.criteria._call_compare", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__call_compare(void)
{
    PyObject *json_values = PyImport_ImportModule("tracegrade.models.json_values");
    if (json_values == NULL) {
        return NULL;
    }
    json_equal_py = PyObject_GetAttrString(json_values, "json_equal");
    Py_DECREF(json_values);
    if (json_equal_py == NULL) {
        return NULL;
    }
    str_name = PyUnicode_InternFromString("name");
    str_args = PyUnicode_InternFromString("args");
    str_args_captured = PyUnicode_InternFromString("args_captured");
    if (!str_name || !str_args || !str_args_captured) {
        return NULL;
    }
    return PyModule_Create(&module_def);
}
