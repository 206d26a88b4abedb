// The ttnn device's C++ hooks: what PyTorch asks a device for in C++ and a Python backend cannot answer
// (core/native.py builds this file against the installed torch's headers and loads it with ctypes).
//
//   PrivateUse1HooksInterface  a pinned-memory (host) allocator and is_pinned, device count,
//                              current device (torch.accelerator, DataLoader(pin_memory=True))
//   DeviceGuardImplInterface   N devices and a per-thread current device (the autograd engine keeps one ready
//                              queue per device index: a backward on ttnn:1 needs deviceCount() >= 2)
//
// Nothing else lives here: no kernels, no ttnn. The device count comes from Python (a callback, asked once).
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_set>

namespace {

using c10::DeviceIndex;

// ---- device count (from Python, once) and the per-thread current device (CUDA's semantics) -------------
using CountFn = int (*)();
std::atomic<CountFn> count_fn{nullptr};
std::atomic<int> count{-1};
std::atomic<DeviceIndex> initial{0};  // where a thread starts: ttnn:0, or a torchrun rank's own chip
thread_local DeviceIndex current_ = -1;

DeviceIndex current() { return current_ >= 0 ? current_ : initial.load(); }
void set_current(DeviceIndex d) { current_ = d; }

DeviceIndex device_count() noexcept {
  int n = count.load();
  if (n < 0) {
    CountFn fn = count_fn.load();
    n = fn ? fn() : 0;  // ctypes takes the GIL; a Python error prints and answers 0
    if (n < 0) n = 0;
    count.store(n);
  }
  return static_cast<DeviceIndex>(n);
}

void check_index(DeviceIndex index) {
  TORCH_CHECK(index >= 0 && index < device_count(), "ttnn:", static_cast<int>(index),
              " is not available: this process sees ", static_cast<int>(device_count()),
              " ttnn device(s) (ttnn:0 .. ttnn:", static_cast<int>(device_count()) - 1, ")");
}

// ---- pinned host memory --------------------------------------------------------------------------------
// Host memory from c10's CPU allocator (64-byte aligned), remembered so that is_pinned() can answer. Its pages
// are not locked: ttnn's host-to-device path copies every host buffer through its own staging memory (the mock
// and a card alike), so pinning buys no DMA here -- it is what DataLoader(pin_memory=True) and the HF Trainer's
// defaults ask for, and they get it.
std::mutex pinned_mutex;
std::unordered_set<const void*> pinned;

void free_pinned(void* ptr);

struct PinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* ptr = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    if (ptr) {
      std::lock_guard<std::mutex> lock(pinned_mutex);
      pinned.insert(ptr);
    }
    return {ptr, ptr, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t n) const override { std::memcpy(dest, src, n); }
};

void free_pinned(void* ptr) {
  if (!ptr) return;
  {
    std::lock_guard<std::mutex> lock(pinned_mutex);
    pinned.erase(ptr);
  }
  c10::free_cpu(ptr);
}

PinnedAllocator pinned_allocator;

bool is_pinned(const void* ptr) {
  std::lock_guard<std::mutex> lock(pinned_mutex);
  return pinned.count(ptr) != 0;
}

// ---- the hooks -----------------------------------------------------------------------------------------
struct Hooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(DeviceIndex) const override { return true; }
  void init() const override {}
  DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(DeviceIndex d) const override { check_index(d); set_current(d); }
  DeviceIndex getCurrentDevice() const override { return current(); }
  DeviceIndex exchangeDevice(DeviceIndex d) const override {
    DeviceIndex old = current();
    setCurrentDevice(d);
    return old;
  }
  DeviceIndex maybeExchangeDevice(DeviceIndex d) const override { return exchangeDevice(d); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &pinned_allocator; }
  bool isPinnedPtr(const void* data) const override { return is_pinned(data); }
};

// ---- the device guard ----------------------------------------------------------------------------------
// One in-order command queue per device (TT-NN's CQ0): every stream is stream 0, events are satisfied by the
// queue's order (features/streams.py keeps torch.ttnn's stream objects).
struct Guard final : c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;
  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return {kType, current()}; }
  void setDevice(c10::Device d) const override {
    if (d.index() < 0) return;
    check_index(d.index());
    set_current(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) set_current(d.index());
  }
  c10::Stream getStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream getNewStream(c10::Device d, int) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream exchangeStream(c10::Stream s) const override { return c10::Stream(c10::Stream::DEFAULT, s.device()); }
  DeviceIndex deviceCount() const noexcept override { return device_count(); }
  void record(void**, const c10::Stream&, const DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const DeviceIndex) const noexcept override {}
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const DeviceIndex) const override {}
};

}  // namespace

// ---- the C interface (ctypes: core/native.py) -----------------------------------------------------------
#define API extern "C" __attribute__((visibility("default")))

// Register the hooks and the guard for PrivateUse1; `fn` answers the device count. Returns a bit set:
// 1 = hooks registered, 2 = guard registered (0: something else registered them first).
API int ttnn_eager_register(CountFn fn) {
  count_fn.store(fn);
  int done = 0;
  if (!at::isPrivateUse1HooksRegistered()) {
    at::RegisterPrivateUse1HooksInterface(new Hooks());
    done |= 1;
  }
  if (!c10::impl::hasDeviceGuardImpl(c10::DeviceType::PrivateUse1)) {
    c10::impl::registerDeviceGuard(c10::DeviceType::PrivateUse1, new Guard());
    done |= 2;
  }
  return done;
}

// The device count when Python knows it without ttnn (a mock device's cluster descriptor).
API void ttnn_eager_set_device_count(int n) { count.store(n); }
// The calling thread's current device (torch.ttnn.current_device / set_device; the guard's).
API int ttnn_eager_current_device() { return current(); }
API void ttnn_eager_set_current_device(int index) { set_current(static_cast<DeviceIndex>(index)); }
API void ttnn_eager_set_initial_device(int index) { initial.store(static_cast<DeviceIndex>(index)); }
// Pinned blocks alive (the tests' view of the allocator).
API int ttnn_eager_pinned_blocks() {
  std::lock_guard<std::mutex> lock(pinned_mutex);
  return static_cast<int>(pinned.size());
}
