//! The engines' support checks asked off the submitting thread ([`super::super::SupportChecks`]),
//! against the fake nvJPEG: any thread may ask, with the decoder's context bound, each caller
//! with a parsed stream of its own; an image its caller checked is not checked again when its
//! batch is submitted, and one it did not check still is.

use super::bookkeeping::{decoder, encoded, header, jpeg, outputs, small_config};
use super::fake::{FakeGpu, Log};
use super::*;
use crate::decode::JpegHeader;

fn count(log: &Log, from: usize, name: &str) -> usize {
    log.lock().calls[from..]
        .iter()
        .filter(|c| c.name == name)
        .count()
}

#[test]
fn images_checked_on_other_threads_are_not_checked_again_at_submission() {
    let log = Arc::new(Log::default());
    let gpu = FakeGpu::new(7, &log);
    let mut dec = decoder(&log, &gpu, true, small_config());
    let checks = dec.support_checks().expect("the engines' checks");
    let bytes: Vec<Vec<u8>> = (0..4).map(|k| jpeg(16 + k, 24, false)).collect();
    // Four workers ask at once, from threads that have no context of their own.
    let start = log.lock().calls.len();
    std::thread::scope(|s| {
        for b in &bytes {
            let checks = checks.clone();
            s.spawn(move || {
                assert_eq!(super::fake::current_context(), 0);
                assert!(checks.accepts(b, None).expect("an answer"));
            });
        }
    });
    assert_eq!(count(&log, start, "supported"), 4);
    assert_eq!(count(&log, start, "nvjpegJpegStreamParseHeader"), 4);

    let headers: Vec<JpegHeader> = bytes.iter().map(|b| header(b)).collect();
    let rois = vec![None; bytes.len()];
    for checked in [true, false] {
        let mut outs = outputs(&dec, &headers, &rois);
        let mut images = encoded(&bytes, &headers, &rois, &mut outs);
        for im in &mut images {
            im.engines_checked = checked;
        }
        let before = log.lock().calls.len();
        // SAFETY: the fake runs on host memory; the outputs live until `finish`.
        let submitted = unsafe { dec.submit(std::ptr::null_mut(), &images) }.expect("submitted");
        let results = dec.finish(submitted).expect("finished");
        assert!(
            results
                .iter()
                .all(|r| r.as_ref().is_ok_and(|i| i.route == GpuRoute::Hardware)),
            "{results:?}"
        );
        let asked = count(&log, before, "supported");
        assert_eq!(
            asked,
            if checked { 0 } else { 4 },
            "checked before: {checked}"
        );
        assert_eq!(count(&log, before, "nvjpegDecodeBatchedEx"), 1);
    }
    let st = log.lock();
    assert!(
        st.calls.iter().all(|c| c.context == 7),
        "every call with the decoder's context"
    );
    assert!(st.violations.is_empty(), "{:?}", st.violations);
}
