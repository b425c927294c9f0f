// loom's errors as Python exceptions, with the same messages: a UserError (the caller's mistake) is a
// ValueError, a DataError (a bad file) is a UserError and an OSError, an InternalError a RuntimeError.
#include "bindings.hpp"

namespace loom_python {

namespace {

PyObject* user_error = nullptr;  // owned by the module for the interpreter's life
PyObject* data_error = nullptr;

}  // namespace

void bind_errors(py::module_& m) {
    user_error = PyErr_NewExceptionWithDoc(
        "loom.UserError",
        "A caller's mistake that loom refused before running anything: a wrong shape, dtype or rank,\n"
        "a graph that cannot run (a placeholder left open), an option out of range. A ValueError;\n"
        "the message names the op, input or option and what was given.",
        PyExc_ValueError, nullptr);
    if (!user_error) throw py::error_already_set();
    py::tuple bases = py::make_tuple(py::handle(user_error), py::handle(PyExc_OSError));
    data_error = PyErr_NewExceptionWithDoc(
        "loom.DataError",
        "A file loom cannot read: missing, truncated, corrupted, or not of the kind asked for. Both a\n"
        "loom.UserError and an OSError (IOError); the message names the file.",
        bases.ptr(), nullptr);
    if (!data_error) throw py::error_already_set();
    m.add_object("UserError", py::handle(user_error));
    m.add_object("DataError", py::handle(data_error));
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const loom::DataError& e) {
            PyErr_SetString(data_error, e.what());
        } catch (const loom::UserError& e) {
            PyErr_SetString(user_error, e.what());
        } catch (const loom::InternalError& e) {
            PyErr_SetString(PyExc_RuntimeError, (std::string("loom internal error: ") + e.what()).c_str());
        }
    });
}

}  // namespace loom_python
