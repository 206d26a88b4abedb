// The two tensor-making steps on every op's path, as a CPython extension module (`_ttnn_eager_native`, loaded
// from the same library as hooks.cpp by core/native.py; METH_FASTCALL: no ctypes argument conversion):
//
//   new_tensor(shape, dtype, index, address, nbytes, handle)   a contiguous tensor of `shape` (a tuple or
//       torch.Size) and `dtype` on ttnn:`index`, on a storage `nbytes` long at the fake device address `address`
//       (non-owning: nothing is allocated or freed), the storage's Python object holding `handle` as
//       `_ttnn_handle` (core/tensor.py: new_tensor). What Python did in four steps (a storage, an empty
//       TensorImpl on the device, set_, the contiguous geometry, then the attribute) in one call.
//   alias(base, sizes, strides, offset)   a tensor on base's storage with that geometry (base given as its
//       `Tensor._cdata`, the TensorImpl's address, which the caller's reference keeps alive): what the
//       device-generic CPU kernel of as_strided does (at::native::as_strided_tensorimpl: the same storage and
//       dispatch keys, PyTorch's bounds check), without the Python dispatcher's boxed call around it
//       (core/dispatch.py: _aliases_of, for the results of view ops).
//   handle(x)   core/tensor.py's maybe_handle for the common cases, without a Python frame: None for an object
//       that is not a tensor or a tensor not on a ttnn device; for a plain tensor (torch.Tensor, nn.Parameter) on
//       one, the storage's `_ttnn_handle` when x has its geometry (x.dtype is the Handle's dtype, offset 0, its
//       shape, contiguous), else the `_ttnn_views` entry of x's key (sizes, strides, offset, dtype: tensor.py's
//       _key). Every other case -- a subclass, symbolic sizes, no storage handle, a view not seen yet (derived
//       in Python), another dtype -- is the Python function given to set_slow(fn), called with x.
//   has_empty(args)   core/dispatch.py's _has_empty: a tensor on a ttnn device with no elements among args, or
//       in a list or tuple among them (not one of ints: sizes, dims); a subclass or symbolic sizes: the Python
//       function given to set_slow_empty(fn), called with args.
//
// Decisions stay in Python: these only make tensors and find what Python stored on them.
#include <ATen/Tensor.h>
#include <ATen/ops/as_strided_native.h>
#include <c10/core/Storage.h>
#include <c10/core/TensorImpl.h>
#include <torch/csrc/Dtype.h>

#include <Python.h>

#include <vector>

// libtorch_python's wrappers into Python objects (declared here: their headers pull in pybind11, which makes
// the build ~30x slower): a Tensor's (the same object while the TensorImpl has one), a Storage's (created once
// per StorageImpl, then kept).
PyObject* THPVariable_Wrap(const at::TensorBase& var);
PyObject* THPStorage_Wrap(c10::Storage storage);
extern PyObject* THPVariableClass;  // torch.Tensor
extern PyObject* ParameterClass;    // torch.nn.Parameter

// torch/csrc/autograd/python_variable.h's THPVariable (torch 2.14: the Tensor held by value); the library is
// built per torch version (core/native.py), so the layout is the installed torch's.
struct Variable {
  PyObject_HEAD
  at::Tensor cdata;
};

namespace {

PyObject* handle_name = nullptr;  // "_ttnn_handle", interned
PyObject* views_name = nullptr;   // "_ttnn_views"
PyObject* dtype_name = nullptr;   // "dtype"
PyObject* shape_name = nullptr;   // "shape"
PyObject* slow = nullptr;         // tensor.py's Python lookup (set_slow)
PyObject* slow_empty = nullptr;   // dispatch.py's Python _has_empty (set_slow_empty)

bool int_list(PyObject* seq, std::vector<int64_t>& out) {
  PyObject* fast = PySequence_Fast(seq, "ttnn_eager: expected a sequence of ints");
  if (!fast) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  out.resize(n);
  PyObject** items = PySequence_Fast_ITEMS(fast);
  for (Py_ssize_t i = 0; i < n; ++i) {
    out[i] = PyLong_AsLongLong(items[i]);
    if (out[i] == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return false;
    }
  }
  Py_DECREF(fast);
  return true;
}

PyObject* new_tensor(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 6) {
    PyErr_SetString(PyExc_TypeError, "new_tensor(shape, dtype, index, address, nbytes, handle)");
    return nullptr;
  }
  try {
    std::vector<int64_t> sizes;
    if (!int_list(args[0], sizes)) return nullptr;
    if (!PyObject_TypeCheck(args[1], &THPDtypeType)) {
      PyErr_SetString(PyExc_TypeError, "new_tensor: dtype must be a torch.dtype");
      return nullptr;
    }
    long index = PyLong_AsLong(args[2]);
    long long address = PyLong_AsLongLong(args[3]);
    long long nbytes = PyLong_AsLongLong(args[4]);
    if (PyErr_Occurred()) return nullptr;
    c10::Device device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index));
    c10::Storage storage(c10::Storage::use_byte_size_t{}, static_cast<size_t>(nbytes),
                         c10::DataPtr(reinterpret_cast<void*>(address), device), nullptr, false);
    auto scalar_type = reinterpret_cast<THPDtype*>(args[1])->scalar_type;
    at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
        c10::Storage(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
        c10::scalarTypeToTypeMeta(scalar_type));
    t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
    PyObject* s = THPStorage_Wrap(std::move(storage));
    if (!s) return nullptr;
    int failed = PyObject_SetAttr(s, handle_name, args[5]);
    Py_DECREF(s);
    if (failed) return nullptr;
    return THPVariable_Wrap(t);
  } catch (const c10::Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    return nullptr;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyObject* alias(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError, "alias(base._cdata, sizes, strides, offset)");
    return nullptr;
  }
  try {
    std::vector<int64_t> sizes, strides;
    if (!int_list(args[1], sizes) || !int_list(args[2], strides)) return nullptr;
    long long offset = PyLong_AsLongLong(args[3]);
    void* impl = PyLong_AsVoidPtr(args[0]);
    if (PyErr_Occurred()) return nullptr;
    at::Tensor base(c10::intrusive_ptr<c10::TensorImpl>::reclaim_copy(static_cast<c10::TensorImpl*>(impl)));
    return THPVariable_Wrap(at::native::as_strided_tensorimpl(base, sizes, strides, offset));
  } catch (const c10::Error& e) {  // PyTorch's own message (the bounds check), as PyTorch raises it
    PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    return nullptr;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyObject* tuple_of(c10::IntArrayRef values) {
  PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(values.size()));
  if (!t) return nullptr;
  for (size_t i = 0; i < values.size(); ++i) {
    PyObject* v = PyLong_FromLongLong(values[i]);
    if (!v) {
      Py_DECREF(t);
      return nullptr;
    }
    PyTuple_SET_ITEM(t, i, v);
  }
  return t;
}

// The Handle's dtype is x's and its shape x's sizes (h.shape: a torch.Size). -1: an error is set.
int same_dtype_and_shape(PyObject* h, c10::ScalarType scalar_type, c10::IntArrayRef sizes, PyObject** dtype) {
  *dtype = PyObject_GetAttr(h, dtype_name);
  if (!*dtype) return -1;
  if (!PyObject_TypeCheck(*dtype, &THPDtypeType) ||
      reinterpret_cast<THPDtype*>(*dtype)->scalar_type != scalar_type)
    return 0;
  PyObject* shape = PyObject_GetAttr(h, shape_name);
  if (!shape) return -1;
  int same = PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) == static_cast<Py_ssize_t>(sizes.size());
  for (size_t i = 0; same && i < sizes.size(); ++i) {
    long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(shape);
      return -1;
    }
    same = v == sizes[i];
  }
  Py_DECREF(shape);
  return same;
}

PyObject* handle(PyObject*, PyObject* x) {
  if (!slow) {
    PyErr_SetString(PyExc_RuntimeError, "ttnn_eager: handle() before set_slow()");
    return nullptr;
  }
  if (!THPVariableClass || !PyObject_TypeCheck(x, reinterpret_cast<PyTypeObject*>(THPVariableClass)))
    Py_RETURN_NONE;
  PyTypeObject* type = Py_TYPE(x);
  if (type != reinterpret_cast<PyTypeObject*>(THPVariableClass) &&
      type != reinterpret_cast<PyTypeObject*>(ParameterClass))
    return PyObject_CallOneArg(slow, x);  // a subclass: its own untyped_storage, maybe
  try {
    c10::TensorImpl* impl = reinterpret_cast<Variable*>(x)->cdata.unsafeGetTensorImpl();
    if (impl->device_type() != c10::DeviceType::PrivateUse1) Py_RETURN_NONE;
    if (!impl->has_storage() || impl->has_symbolic_sizes_strides()) return PyObject_CallOneArg(slow, x);
    PyObject* s = THPStorage_Wrap(impl->storage());
    if (!s) return nullptr;
    PyObject* h = PyObject_GetAttr(s, handle_name);
    if (!h) {
      Py_DECREF(s);
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return nullptr;
      PyErr_Clear();
      Py_RETURN_NONE;
    }
    if (h == Py_None) {
      Py_DECREF(s);
      return h;
    }
    auto scalar_type = impl->dtype().toScalarType();
    c10::IntArrayRef sizes = impl->sizes();
    PyObject* dtype = nullptr;
    int same = same_dtype_and_shape(h, scalar_type, sizes, &dtype);
    if (same < 0) {
      Py_XDECREF(dtype);
      Py_DECREF(h);
      Py_DECREF(s);
      return nullptr;
    }
    if (same && impl->storage_offset() == 0 && impl->is_contiguous()) {
      Py_DECREF(dtype);
      Py_DECREF(s);
      return h;  // the storage's base Handle
    }
    bool dtype_same = PyObject_TypeCheck(dtype, &THPDtypeType) &&
                      reinterpret_cast<THPDtype*>(dtype)->scalar_type == scalar_type;
    Py_DECREF(h);
    PyObject* found = nullptr;
    if (dtype_same) {  // the view Handle stored under x's key, if any
      PyObject* views = PyObject_GetAttr(s, views_name);
      if (!views) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
          Py_DECREF(dtype);
          Py_DECREF(s);
          return nullptr;
        }
        PyErr_Clear();
      } else {
        PyObject* size_t_ = tuple_of(sizes);
        PyObject* stride_t = size_t_ ? tuple_of(impl->strides()) : nullptr;
        PyObject* offset = stride_t ? PyLong_FromLongLong(impl->storage_offset()) : nullptr;
        PyObject* key = offset ? PyTuple_Pack(4, size_t_, stride_t, offset, dtype) : nullptr;
        Py_XDECREF(size_t_);
        Py_XDECREF(stride_t);
        Py_XDECREF(offset);
        if (!key) {
          Py_DECREF(views);
          Py_DECREF(dtype);
          Py_DECREF(s);
          return nullptr;
        }
        if (PyDict_CheckExact(views)) {
          found = PyDict_GetItemWithError(views, key);  // borrowed
          Py_XINCREF(found);
        }
        Py_DECREF(key);
        Py_DECREF(views);
        if (!found && PyErr_Occurred()) {
          Py_DECREF(dtype);
          Py_DECREF(s);
          return nullptr;
        }
      }
    }
    Py_DECREF(dtype);
    Py_DECREF(s);
    if (found) return found;
    return PyObject_CallOneArg(slow, x);  // a view not seen yet (derived in Python), or another dtype
  } catch (const c10::Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    return nullptr;
  }
}

// 1: x is a tensor on a ttnn device with no elements, 0: it is not, -1: Python decides (a subclass, symbolic sizes).
int empty_on_device(PyObject* x) {
  if (!PyObject_TypeCheck(x, reinterpret_cast<PyTypeObject*>(THPVariableClass))) return 0;
  PyTypeObject* type = Py_TYPE(x);
  if (type != reinterpret_cast<PyTypeObject*>(THPVariableClass) &&
      type != reinterpret_cast<PyTypeObject*>(ParameterClass))
    return -1;
  c10::TensorImpl* impl = reinterpret_cast<Variable*>(x)->cdata.unsafeGetTensorImpl();
  if (impl->has_symbolic_sizes_strides()) return -1;
  return impl->numel() == 0 && impl->device_type() == c10::DeviceType::PrivateUse1;
}

PyObject* has_empty(PyObject*, PyObject* args) {
  if (!slow_empty) {
    PyErr_SetString(PyExc_RuntimeError, "ttnn_eager: has_empty() before set_slow_empty()");
    return nullptr;
  }
  if (!THPVariableClass || !PyTuple_Check(args)) return PyObject_CallOneArg(slow_empty, args);
  try {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
      PyObject* a = PyTuple_GET_ITEM(args, i);
      int r = 0;
      if (PyList_CheckExact(a) || PyTuple_CheckExact(a)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(a);
        PyObject** items = PySequence_Fast_ITEMS(a);
        if (n == 0 || PyLong_CheckExact(items[0])) continue;  // (sizes and dims: ints only)
        for (Py_ssize_t j = 0; j < n && r == 0; ++j) r = empty_on_device(items[j]);
      } else {
        r = empty_on_device(a);
      }
      if (r < 0) return PyObject_CallOneArg(slow_empty, args);
      if (r) Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
  } catch (const c10::Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    return nullptr;
  }
}

PyObject* set_slow_empty(PyObject*, PyObject* fn) {
  Py_XSETREF(slow_empty, Py_NewRef(fn));
  Py_RETURN_NONE;
}

PyObject* set_slow(PyObject*, PyObject* fn) {
  Py_XSETREF(slow, Py_NewRef(fn));
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"handle", handle, METH_O, "core/tensor.py's maybe_handle: a ttnn tensor's Handle, else None"},
    {"set_slow", set_slow, METH_O, "the Python lookup handle() calls for the cases it leaves to Python"},
    {"has_empty", has_empty, METH_O, "core/dispatch.py's _has_empty: a ttnn tensor with no elements in args"},
    {"set_slow_empty", set_slow_empty, METH_O, "the Python _has_empty for the cases has_empty leaves to it"},
    {"new_tensor", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(new_tensor)), METH_FASTCALL,
     "a new contiguous ttnn tensor on a non-owning storage holding a Handle"},
    {"alias", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(alias)), METH_FASTCALL,
     "a tensor on base's storage with the given sizes, strides and storage offset"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ttnn_eager_native", nullptr, -1, methods};

}  // namespace

extern "C" __attribute__((visibility("default"))) PyObject* PyInit__ttnn_eager_native() {
  handle_name = PyUnicode_InternFromString("_ttnn_handle");
  views_name = PyUnicode_InternFromString("_ttnn_views");
  dtype_name = PyUnicode_InternFromString("dtype");
  shape_name = PyUnicode_InternFromString("shape");
  if (!handle_name || !views_name || !dtype_name || !shape_name) return nullptr;
  return PyModule_Create(&module);
}
