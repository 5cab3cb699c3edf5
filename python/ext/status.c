/* status.c — what a batch call does with images that failed (their status is
 * not 0): strict=True raises l3.Error listing them, strict=None (the default)
 * warns with l3.DecodeWarning, strict=False leaves it to the caller (.status,
 * .errors, or the None entries of decode_list). */
#include "l3py.h"

/* "[i] reason; [j] reason; ..." for the failed entries, or NULL. */
static PyObject *failure_list(const int *status, Py_ssize_t n)
{
    PyObject *msg = PyUnicode_FromString("");
    const char *sep = "";
    for (Py_ssize_t i = 0; msg && i < n; i++) {
        if (!status[i])
            continue;
        PyObject *m2 = PyUnicode_FromFormat("%U%s[%zd] %s", msg, sep, i,
                                            l3gpu_image_strerror(status[i]));
        Py_DECREF(msg);
        msg = m2;
        sep = "; ";
    }
    return msg;
}

int l3py_report_failures(const char *what, const char *outcome, const int *status,
                         Py_ssize_t n, PyObject *strict)
{
    int failed = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        failed += status[i] != 0;
    if (!failed)
        return 0;
    int mode = strict == NULL || strict == Py_None ? -1 : PyObject_IsTrue(strict);
    if (mode == 0)
        return 0;
    if (mode < -1 || (mode == -1 && PyErr_Occurred()))
        return -1;
    PyObject *list = failure_list(status, n);
    if (!list)
        return -1;
    int r = 0;
    if (mode == 1) {
        PyObject *msg = PyUnicode_FromFormat("%s: %d of %zd images failed: %U", what, failed, n,
                                             list);
        if (msg) {
            PyErr_SetObject(l3py_error, msg);
            Py_DECREF(msg);
        }
        r = -1;
    } else {
        PyObject *msg = PyUnicode_FromFormat(
            "%s: %d of %zd images failed (%U); %s. strict=True raises l3.Error instead, "
            "strict=False silences this warning", what, failed, n, list, outcome);
        if (!msg || PyErr_WarnEx(l3py_decode_warning, PyUnicode_AsUTF8(msg), 1) < 0)
            r = -1;
        Py_XDECREF(msg);
    }
    Py_DECREF(list);
    return r;
}
