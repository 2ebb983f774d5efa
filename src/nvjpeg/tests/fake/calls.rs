//! The fake nvJPEG's C functions: objects are boxes whose address is their identity, and
//! every call finds the shared [`Log`] through the object it is given.

use std::cell::Cell;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::Arc;

use super::super::super::sys;
use super::{checksum, current_context, Call, Given, Log, Obj, State, Work};

pub(super) fn write_pixel(dest: usize, v: u8) {
    // SAFETY: outputs are test buffers of at least three bytes, alive until finished.
    unsafe { std::ptr::write_bytes(dest as *mut u8, v, 3) };
}

thread_local! {
    /// The log new handles belong to (nvjpegCreateExV2 has no object to find it from).
    pub(super) static CREATING: std::cell::RefCell<Option<Arc<Log>>> = const { std::cell::RefCell::new(None) };
}

/// A fake object: its address is its identity; it knows its log.
struct Fake {
    log: Arc<Log>,
}

fn new_obj(log: &Arc<Log>, kind: &'static str, st: &mut State) -> usize {
    let p = Box::into_raw(Box::new(Fake { log: log.clone() })) as usize;
    st.objects.insert(
        p,
        Obj {
            kind,
            ..Obj::default()
        },
    );
    p
}

/// The log of fake object `p`, with the call recorded.
///
/// # Safety
/// `p` is a live fake object.
unsafe fn enter(p: *mut c_void, name: &'static str) -> Arc<Log> {
    // SAFETY: per the contract.
    let log = unsafe { &*(p as *const Fake) }.log.clone();
    log.lock().calls.push(Call {
        name,
        context: current_context(),
    });
    log
}

unsafe fn destroy(p: *mut c_void, name: &'static str) -> sys::nvjpegStatus_t {
    // SAFETY: the decoder passes fake objects it created here.
    let log = unsafe { enter(p, name) };
    let mut st = log.lock();
    st.check_idle(p as usize, name);
    if let Some(o) = st.objects.remove(&(p as usize)) {
        // A buffer gives its memory back through its allocator, as nvJPEG does.
        if let Some((addr, _)) = o.mem {
            drop(st);
            // SAFETY: the allocator the buffer was created with, and memory it gave.
            unsafe { give_back(&o, addr) };
        }
    }
    // SAFETY: created by `new_obj`, destroyed once.
    drop(unsafe { Box::from_raw(p as *mut Fake) });
    sys::NVJPEG_STATUS_SUCCESS
}

unsafe fn give_back(o: &Obj, addr: usize) {
    // SAFETY: the allocators' functions and contexts, valid while their handle lives.
    unsafe {
        if let Some(Given(a)) = o.pinned_alloc {
            (a.pinned_free.unwrap())(a.pinned_ctx, addr as *mut c_void, 0, std::ptr::null_mut());
        }
        if let Some(Given(a)) = o.dev_alloc {
            (a.dev_free.unwrap())(a.dev_ctx, addr as *mut c_void, 0, std::ptr::null_mut());
        }
    }
}

/// Grows buffer `buf` to at least `len` bytes through its allocator (free, then malloc).
///
/// # Safety
/// `buf` is a live fake buffer of `log`.
unsafe fn grow(log: &Log, buf: usize, len: usize) -> Option<usize> {
    let o = log.lock().objects.get(&buf).cloned()?;
    if let Some((addr, size)) = o.mem {
        if size >= len {
            return Some(addr);
        }
        // SAFETY: per the contract.
        unsafe { give_back(&o, addr) };
    }
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: the allocator's functions and context are valid while the handle lives.
    let rc = unsafe {
        match (o.pinned_alloc, o.dev_alloc) {
            (Some(Given(a)), _) => {
                (a.pinned_malloc.unwrap())(a.pinned_ctx, &mut p, len, std::ptr::null_mut())
            }
            (_, Some(Given(a))) => {
                (a.dev_malloc.unwrap())(a.dev_ctx, &mut p, len, std::ptr::null_mut())
            }
            _ => 1,
        }
    };
    let mut st = log.lock();
    if rc != 0 || p.is_null() {
        st.violations.push("an allocator failed".into());
        return None;
    }
    st.objects.get_mut(&buf)?.mem = Some((p as usize, len));
    Some(p as usize)
}

macro_rules! create_fn {
    ($name:ident, $kind:literal, ($($arg:ident: $ty:ty),*), $out:ident: $outty:ty) => {
        pub(super) unsafe extern "C" fn $name(h: sys::nvjpegHandle_t $(, $arg: $ty)*, $out: *mut $outty) -> sys::nvjpegStatus_t {
            $(let _ = $arg;)*
            // SAFETY: the decoder passes a fake handle.
            let log = unsafe { enter(h.cast(), stringify!($name)) };
            let mut st = log.lock();
            let p = new_obj(&log, $kind, &mut st);
            // SAFETY: a valid out-pointer from the decoder.
            unsafe { *$out = p as $outty };
            sys::NVJPEG_STATUS_SUCCESS
        }
    };
}

create_fn!(state_create, "state", (), out: sys::nvjpegJpegState_t);
create_fn!(params_create, "params", (), out: sys::nvjpegDecodeParams_t);
create_fn!(stream_create, "jpeg stream", (), out: sys::nvjpegJpegStream_t);
create_fn!(decoder_create, "decoder", (b: sys::nvjpegBackend_t), out: sys::nvjpegJpegDecoder_t);
create_fn!(decoder_state_create, "state", (d: sys::nvjpegJpegDecoder_t), out: sys::nvjpegJpegState_t);

pub(super) unsafe extern "C" fn create_ex_v2(
    backend: sys::nvjpegBackend_t,
    dev: *mut sys::nvjpegDevAllocatorV2_t,
    pinned: *mut sys::nvjpegPinnedAllocatorV2_t,
    _flags: c_uint,
    out: *mut sys::nvjpegHandle_t,
) -> sys::nvjpegStatus_t {
    let log = CREATING
        .with(|c| c.borrow().clone())
        .expect("a fake log for this thread");
    let mut st = log.lock();
    st.calls.push(Call {
        name: "nvjpegCreateExV2",
        context: current_context(),
    });
    if backend == sys::NVJPEG_BACKEND_HARDWARE && !st.hardware {
        return sys::NVJPEG_STATUS_ARCH_MISMATCH;
    }
    if !dev.is_null() && !pinned.is_null() {
        st.handles_with_allocators += 1;
    }
    let p = new_obj(&log, "handle", &mut st);
    // SAFETY: valid pointers from the decoder (the allocators may be null).
    unsafe {
        let o = st.objects.get_mut(&p).unwrap();
        o.dev_alloc = dev.as_ref().copied().map(Given);
        o.pinned_alloc = pinned.as_ref().copied().map(Given);
        *out = p as sys::nvjpegHandle_t;
    }
    sys::NVJPEG_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn destroy_handle(h: sys::nvjpegHandle_t) -> sys::nvjpegStatus_t {
    // SAFETY: a fake handle.
    unsafe { destroy(h.cast(), "nvjpegDestroy") }
}
pub(super) unsafe extern "C" fn destroy_state(s: sys::nvjpegJpegState_t) -> sys::nvjpegStatus_t {
    // SAFETY: a fake state.
    unsafe { destroy(s.cast(), "nvjpegJpegStateDestroy") }
}
pub(super) unsafe extern "C" fn destroy_params(
    p: sys::nvjpegDecodeParams_t,
) -> sys::nvjpegStatus_t {
    // SAFETY: fake parameters.
    unsafe { destroy(p.cast(), "nvjpegDecodeParamsDestroy") }
}
pub(super) unsafe extern "C" fn destroy_stream(s: sys::nvjpegJpegStream_t) -> sys::nvjpegStatus_t {
    // SAFETY: a fake stream.
    unsafe { destroy(s.cast(), "nvjpegJpegStreamDestroy") }
}
pub(super) unsafe extern "C" fn destroy_decoder(
    d: sys::nvjpegJpegDecoder_t,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake decoder.
    unsafe { destroy(d.cast(), "nvjpegDecoderDestroy") }
}
pub(super) unsafe extern "C" fn destroy_pinned(
    b: sys::nvjpegBufferPinned_t,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake buffer.
    unsafe { destroy(b.cast(), "nvjpegBufferPinnedDestroy") }
}
pub(super) unsafe extern "C" fn destroy_device(
    b: sys::nvjpegBufferDevice_t,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake buffer.
    unsafe { destroy(b.cast(), "nvjpegBufferDeviceDestroy") }
}

pub(super) unsafe extern "C" fn set_device_padding(
    padding: usize,
    h: sys::nvjpegHandle_t,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake handle.
    let log = unsafe { enter(h.cast(), "nvjpegSetDeviceMemoryPadding") };
    log.lock().paddings.push(("device", padding));
    sys::NVJPEG_STATUS_SUCCESS
}
pub(super) unsafe extern "C" fn set_pinned_padding(
    padding: usize,
    h: sys::nvjpegHandle_t,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake handle.
    let log = unsafe { enter(h.cast(), "nvjpegSetPinnedMemoryPadding") };
    log.lock().paddings.push(("pinned", padding));
    sys::NVJPEG_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn preallocate(
    h: sys::nvjpegHandle_t,
    _s: sys::nvjpegJpegState_t,
    batch: c_int,
    w: c_int,
    hh: c_int,
    _css: sys::nvjpegChromaSubsampling_t,
    _fmt: sys::nvjpegOutputFormat_t,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake handle.
    let log = unsafe { enter(h.cast(), "nvjpegDecodeBatchedPreAllocate") };
    log.lock().preallocated.push((batch, w, hh));
    sys::NVJPEG_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn hardware_info(
    h: sys::nvjpegHandle_t,
    e: *mut c_uint,
    c: *mut c_uint,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake handle; valid out-pointers.
    unsafe {
        enter(h.cast(), "nvjpegGetHardwareDecoderInfo");
        *e = 1;
        *c = 5;
    }
    sys::NVJPEG_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn image_info(
    h: sys::nvjpegHandle_t,
    _d: *const u8,
    _l: usize,
    n: *mut c_int,
    css: *mut sys::nvjpegChromaSubsampling_t,
    _w: *mut c_int,
    _hh: *mut c_int,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake handle; valid out-pointers.
    unsafe {
        enter(h.cast(), "nvjpegGetImageInfo");
        *n = 3;
        *css = sys::NVJPEG_CSS_420;
    }
    sys::NVJPEG_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn params_format(
    p: sys::nvjpegDecodeParams_t,
    _f: sys::nvjpegOutputFormat_t,
) -> sys::nvjpegStatus_t {
    // SAFETY: fake parameters.
    unsafe { enter(p.cast(), "nvjpegDecodeParamsSetOutputFormat") };
    sys::NVJPEG_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn params_roi(
    p: sys::nvjpegDecodeParams_t,
    x: c_int,
    y: c_int,
    w: c_int,
    h: c_int,
) -> sys::nvjpegStatus_t {
    // SAFETY: fake parameters.
    let log = unsafe { enter(p.cast(), "nvjpegDecodeParamsSetROI") };
    if let Some(o) = log.lock().objects.get_mut(&(p as usize)) {
        o.roi = (x, y, w, h);
    }
    sys::NVJPEG_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn stream_parse(
    h: sys::nvjpegHandle_t,
    data: *const u8,
    len: usize,
    _meta: c_int,
    _save: c_int,
    s: sys::nvjpegJpegStream_t,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake handle.
    let log = unsafe { enter(h.cast(), "nvjpegJpegStreamParse") };
    let mut st = log.lock();
    st.check_idle(s as usize, "nvjpegJpegStreamParse");
    if let Some(o) = st.objects.get_mut(&(s as usize)) {
        o.parsed = Some((data as usize, len));
    }
    sys::NVJPEG_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn stream_parse_header(
    h: sys::nvjpegHandle_t,
    _data: *const u8,
    _len: usize,
    _s: sys::nvjpegJpegStream_t,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake handle.
    unsafe { enter(h.cast(), "nvjpegJpegStreamParseHeader") };
    sys::NVJPEG_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn supported(
    d: *mut c_void,
    _s: sys::nvjpegJpegStream_t,
    _p: sys::nvjpegDecodeParams_t,
    not_supported: *mut c_int,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake handle or decoder; a valid out-pointer.
    unsafe {
        enter(d, "supported");
        *not_supported = 0;
    }
    sys::NVJPEG_STATUS_SUCCESS
}
pub(super) unsafe extern "C" fn decoder_supported(
    d: sys::nvjpegJpegDecoder_t,
    s: sys::nvjpegJpegStream_t,
    p: sys::nvjpegDecodeParams_t,
    n: *mut c_int,
) -> sys::nvjpegStatus_t {
    // SAFETY: forwarded.
    unsafe { supported(d.cast(), s, p, n) }
}
pub(super) unsafe extern "C" fn batched_supported(
    h: sys::nvjpegHandle_t,
    s: sys::nvjpegJpegStream_t,
    p: sys::nvjpegDecodeParams_t,
    n: *mut c_int,
) -> sys::nvjpegStatus_t {
    // SAFETY: forwarded.
    unsafe { supported(h.cast(), s, p, n) }
}

pub(super) unsafe extern "C" fn batched_initialize(
    h: sys::nvjpegHandle_t,
    s: sys::nvjpegJpegState_t,
    _n: c_int,
    _t: c_int,
    _f: sys::nvjpegOutputFormat_t,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake handle.
    let log = unsafe { enter(h.cast(), "nvjpegDecodeBatchedInitialize") };
    log.lock()
        .check_idle(s as usize, "nvjpegDecodeBatchedInitialize");
    sys::NVJPEG_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn batched_ex(
    h: sys::nvjpegHandle_t,
    s: sys::nvjpegJpegState_t,
    data: *const *const u8,
    lengths: *const usize,
    dest: *mut sys::nvjpegImage_t,
    params: *mut sys::nvjpegDecodeParams_t,
    _stream: sys::cudaStream_t,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake handle.
    let log = unsafe { enter(h.cast(), "nvjpegDecodeBatchedEx") };
    let mut st = log.lock();
    if st.fail_batched {
        return sys::NVJPEG_STATUS_EXECUTION_FAILED;
    }
    // The batch size is what the last initialize said; the decoder passes that many.
    let count = BATCH.with(|b| b.get());
    for i in 0..count {
        // SAFETY: arrays of `count` entries from the decoder.
        let (d, len, out, p) =
            unsafe { (*data.add(i), *lengths.add(i), *dest.add(i), *params.add(i)) };
        // SAFETY: the decoder's staged bytes, readable now.
        let sum = checksum(unsafe { std::slice::from_raw_parts(d, len) });
        let roi = st
            .objects
            .get(&(p as usize))
            .map_or((0, 0, 0, 0), |o| o.roi);
        st.rois.push(roi);
        st.batched_data.push(d as usize);
        st.queue.push(Work::Batched {
            data: d as usize,
            len,
            sum,
            dest: out.channel[0] as usize,
            state: s as usize,
        });
    }
    sys::NVJPEG_STATUS_SUCCESS
}

thread_local! {
    /// The batch size of the last `nvjpegDecodeBatchedInitialize` on this thread.
    static BATCH: Cell<usize> = const { Cell::new(0) };
}

pub(super) unsafe extern "C" fn batched_initialize_counting(
    h: sys::nvjpegHandle_t,
    s: sys::nvjpegJpegState_t,
    n: c_int,
    t: c_int,
    f: sys::nvjpegOutputFormat_t,
) -> sys::nvjpegStatus_t {
    BATCH.with(|b| b.set(n.max(0) as usize));
    // SAFETY: forwarded.
    unsafe { batched_initialize(h, s, n, t, f) }
}

pub(super) unsafe extern "C" fn buffer_pinned_create(
    h: sys::nvjpegHandle_t,
    a: *mut sys::nvjpegPinnedAllocatorV2_t,
    out: *mut sys::nvjpegBufferPinned_t,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake handle; valid pointers.
    let log = unsafe { enter(h.cast(), "nvjpegBufferPinnedCreateV2") };
    let mut st = log.lock();
    let p = new_obj(&log, "pinned buffer", &mut st);
    // SAFETY: valid pointers from the decoder.
    unsafe {
        st.objects.get_mut(&p).unwrap().pinned_alloc = a.as_ref().copied().map(Given);
        *out = p as sys::nvjpegBufferPinned_t;
    }
    sys::NVJPEG_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn buffer_device_create(
    h: sys::nvjpegHandle_t,
    a: *mut sys::nvjpegDevAllocatorV2_t,
    out: *mut sys::nvjpegBufferDevice_t,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake handle; valid pointers.
    let log = unsafe { enter(h.cast(), "nvjpegBufferDeviceCreateV2") };
    let mut st = log.lock();
    let p = new_obj(&log, "device buffer", &mut st);
    // SAFETY: valid pointers from the decoder.
    unsafe {
        st.objects.get_mut(&p).unwrap().dev_alloc = a.as_ref().copied().map(Given);
        *out = p as sys::nvjpegBufferDevice_t;
    }
    sys::NVJPEG_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn attach_pinned(
    s: sys::nvjpegJpegState_t,
    b: sys::nvjpegBufferPinned_t,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake state.
    let log = unsafe { enter(s.cast(), "nvjpegStateAttachPinnedBuffer") };
    if let Some(o) = log.lock().objects.get_mut(&(s as usize)) {
        o.pinned = b as usize;
    }
    sys::NVJPEG_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn attach_device(
    s: sys::nvjpegJpegState_t,
    b: sys::nvjpegBufferDevice_t,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake state.
    let log = unsafe { enter(s.cast(), "nvjpegStateAttachDeviceBuffer") };
    if let Some(o) = log.lock().objects.get_mut(&(s as usize)) {
        o.device = b as usize;
    }
    sys::NVJPEG_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn decode_host(
    h: sys::nvjpegHandle_t,
    _d: sys::nvjpegJpegDecoder_t,
    s: sys::nvjpegJpegState_t,
    p: sys::nvjpegDecodeParams_t,
    js: sys::nvjpegJpegStream_t,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake handle.
    let log = unsafe { enter(h.cast(), "nvjpegDecodeJpegHost") };
    let (pinned, parsed) = {
        let mut st = log.lock();
        st.check_idle(s as usize, "nvjpegDecodeJpegHost (state)");
        let pinned = st.objects.get(&(s as usize)).map_or(0, |o| o.pinned);
        st.check_idle(pinned, "nvjpegDecodeJpegHost (pinned buffer)");
        let roi = st
            .objects
            .get(&(p as usize))
            .map_or((0, 0, 0, 0), |o| o.roi);
        st.rois.push(roi);
        (
            pinned,
            st.objects.get(&(js as usize)).and_then(|o| o.parsed),
        )
    };
    let Some((data, len)) = parsed else {
        return sys::NVJPEG_STATUS_INVALID_PARAMETER;
    };
    // The "Huffman decode": the image's checksum into the pinned buffer (grown to fit).
    // SAFETY: a live fake buffer of this log.
    let Some(addr) = (unsafe { grow(&log, pinned, len) }) else {
        return sys::NVJPEG_STATUS_ALLOCATOR_FAILURE;
    };
    // SAFETY: the parsed bytes are readable during the host phase; `addr` is the buffer's
    // memory of at least `len` ≥ 1 bytes.
    unsafe { *(addr as *mut u8) = checksum(std::slice::from_raw_parts(data as *const u8, len)) };
    sys::NVJPEG_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn decode_transfer(
    h: sys::nvjpegHandle_t,
    _d: sys::nvjpegJpegDecoder_t,
    s: sys::nvjpegJpegState_t,
    js: sys::nvjpegJpegStream_t,
    _stream: sys::cudaStream_t,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake handle.
    let log = unsafe { enter(h.cast(), "nvjpegDecodeJpegTransferToDevice") };
    let device = log
        .lock()
        .objects
        .get(&(s as usize))
        .map_or(0, |o| o.device);
    // SAFETY: a live fake buffer of this log.
    if unsafe { grow(&log, device, 4096) }.is_none() {
        return sys::NVJPEG_STATUS_ALLOCATOR_FAILURE;
    }
    let mut st = log.lock();
    let pinned = st.objects.get(&(s as usize)).map_or(0, |o| o.pinned);
    st.queue.push(Work::Transfer {
        state: s as usize,
        pinned,
        stream: js as usize,
    });
    sys::NVJPEG_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn decode_device(
    h: sys::nvjpegHandle_t,
    _d: sys::nvjpegJpegDecoder_t,
    s: sys::nvjpegJpegState_t,
    dest: *mut sys::nvjpegImage_t,
    _stream: sys::cudaStream_t,
) -> sys::nvjpegStatus_t {
    // SAFETY: a fake handle.
    let log = unsafe { enter(h.cast(), "nvjpegDecodeJpegDevice") };
    // SAFETY: a valid destination from the decoder.
    let out = unsafe { (*dest).channel[0] } as usize;
    log.lock().queue.push(Work::Device {
        state: s as usize,
        dest: out,
    });
    sys::NVJPEG_STATUS_SUCCESS
}
