//! The fused chain's launches over a batch, a pass of `GpuStage::launch` (`gpu_launch.rs`):
//! its descriptors and tap tables built before the batch's upload is leased
//! (`ChainDescs::build`: their sizes count in it), pointed at the sources and places once
//! those are on the device, then one launch, or with color jitter three steps (geometry
//! into u8 images, the jitter in place, the rest).

use crate::cuda::chain::launcher::{chain_grid, launch_jitter, JitterStages};
use crate::cuda::chain::{build_desc, FusedSample, SourceDims};
use crate::cuda::desc::{as_bytes, FusedDesc, JitterDesc};
use crate::cuda::gpu_device::{streams, DevicePtr, KernelArg};
use crate::cuda::kernel::Kernel;
use crate::cuda::pool::DeviceBuffer;
use crate::error::Error;

use super::gpu_plan::{Prepared, Source};
use super::gpu_stage::{Entry, GpuStage, Staging, ALIGN};

/// The batch's device buffer of descriptors and tap tables, filled in order.
pub(super) struct DescArea {
    base: DevicePtr,
    at: usize,
}

impl DescArea {
    /// An empty area at `base`.
    pub(super) fn new(base: DevicePtr) -> DescArea {
        DescArea { base, at: 0 }
    }
}

/// One chain launch's descriptors (a sample each) and their tap tables.
#[derive(Default)]
struct ChainPass {
    descs: Vec<FusedDesc>,
    taps: Vec<i32>,
}

/// The fused chain's work for a batch: one launch (`geometry`), or with color jitter three
/// steps (`geometry` into u8 images, `jitter` in place, then `rest`). Descriptors are built
/// before the upload is leased (their sizes count in it); their addresses are set by
/// `GpuStage::launch_chain`, once the sources are on the device.
pub(super) struct ChainDescs {
    /// The entries the chain runs, by place.
    places: Vec<usize>,
    /// Their samples, as prepared.
    fused: Vec<FusedSample>,
    /// The jitter's three steps, when a sample has color jitter.
    stages: Option<JitterStages>,
    geometry: ChainPass,
    rest: ChainPass,
    jitter: Vec<JitterDesc>,
    /// Each sample's bytes in the device buffer: descriptors, taps, its luma sum.
    sample_bytes: Vec<usize>,
}

impl ChainDescs {
    /// The descriptors and tap tables of the chain samples of `entries` (addresses left 0).
    pub(super) fn build(entries: &[Entry]) -> Result<ChainDescs, Error> {
        let places: Vec<usize> = (0..entries.len())
            .filter(|&k| chain_sample(&entries[k]).is_some())
            .collect();
        let fused: Vec<FusedSample> = places
            .iter()
            .filter_map(|&k| chain_sample(&entries[k]))
            .collect();
        let stages = JitterStages::of(&fused);
        let mut c = ChainDescs {
            places,
            fused,
            stages,
            geometry: ChainPass::default(),
            rest: ChainPass::default(),
            jitter: Vec::new(),
            sample_bytes: Vec::new(),
        };
        const DESC: usize = std::mem::size_of::<FusedDesc>();
        let geometry = c.stages.as_ref().map_or(&c.fused, |s| &s.geometry);
        for (&k, s) in c.places.iter().zip(geometry) {
            let d = decoded_dims(&entries[k])?;
            let taps = c.geometry.taps.len();
            c.geometry
                .descs
                .push(build_desc(d, s, &mut c.geometry.taps)?);
            c.sample_bytes
                .push(DESC + 4 * (c.geometry.taps.len() - taps) + 8);
        }
        if let Some(st) = &c.stages {
            for ((j, r), bytes) in st.jitter.iter().zip(&st.rest).zip(&mut c.sample_bytes) {
                let (h, w) = r.output_size();
                c.jitter.push(j.desc(h * w)?);
                let dims = SourceDims {
                    height: h,
                    width: w,
                    channels: 3,
                    pitch: w * 3,
                };
                let taps = c.rest.taps.len();
                c.rest.descs.push(build_desc(dims, r, &mut c.rest.taps)?);
                *bytes += std::mem::size_of::<JitterDesc>() + DESC + 4 * (c.rest.taps.len() - taps);
            }
        }
        // A table is never empty: its upload needs an address.
        c.geometry.taps.push(0);
        c.rest.taps.push(0);
        Ok(c)
    }

    /// The samples of the first launch (all of the chain, or its geometry before jitter).
    fn geometry_samples(&self) -> &[FusedSample] {
        self.stages.as_ref().map_or(&self.fused, |s| &s.geometry)
    }

    /// Each sample's bytes in the device buffer ([`ChainDescs::device_len`] is their sum and
    /// at most `gpu_stage::DESC_SLACK` more).
    pub(super) fn sample_bytes(&self) -> &[usize] {
        &self.sample_bytes
    }

    /// Bytes of the device buffer for every descriptor and table (the jitter's luma sums
    /// included), each aligned.
    pub(super) fn device_len(&self) -> usize {
        [
            std::mem::size_of_val(&self.geometry.descs[..]),
            std::mem::size_of_val(&self.rest.descs[..]),
            std::mem::size_of_val(&self.jitter[..]),
            4 * self.geometry.taps.len(),
            4 * self.rest.taps.len(),
        ]
        .iter()
        .map(|l| l.next_multiple_of(ALIGN))
        .sum::<usize>()
            + (8 * self.places.len()).next_multiple_of(ALIGN)
    }
}

impl GpuStage {
    /// Stages `bytes` and copies them to the next place in `area`; their device address.
    fn put_desc(
        &self,
        staging: &mut Staging<'_>,
        area: &mut DescArea,
        bytes: &[u8],
    ) -> Result<DevicePtr, Error> {
        let from = staging.put(bytes);
        let dst = area.base + area.at as u64;
        // SAFETY: the lease's bytes were just written and stay until its done event;
        // `dst..dst + len` lies in the batch's descriptor buffer (sized by
        // `ChainDescs::device_len` for every descriptor and table), kept until the release
        // event.
        unsafe {
            self.dev.copy_to_device(
                streams::KERNELS,
                dst,
                staging.lease.ptr(from),
                bytes.len().max(1),
            )?
        };
        area.at = (area.at + bytes.len()).next_multiple_of(ALIGN);
        Ok(dst)
    }

    /// Points the chain's descriptors at their sources and at their places in the output
    /// (`place(k)`: entry `k`'s), and launches it (with the jitter's steps between its two
    /// launches); the buffer of the u8 images between them, to keep until the release.
    pub(super) fn launch_chain(
        &self,
        entries: &[Entry],
        c: &mut ChainDescs,
        place: &dyn Fn(usize) -> DevicePtr,
        staging: &mut Staging<'_>,
        area: &mut DescArea,
    ) -> Result<Option<DeviceBuffer>, Error> {
        if c.places.is_empty() {
            return Ok(None);
        }
        for (d, &k) in c.geometry.descs.iter_mut().zip(&c.places) {
            d.src = source_ptr(&entries[k])?;
        }
        let mut mid = None;
        if let Some(st) = &c.stages {
            let mut mid_len = 0;
            let mut mid_at = Vec::with_capacity(st.geometry.len());
            for s in &st.geometry {
                let (h, w) = s.output_size();
                mid_at.push(mid_len);
                mid_len = (mid_len + h * w * 3).next_multiple_of(ALIGN);
            }
            let n = entries.len();
            let m = self.pools.jitter.take(mid_len, streams::KERNELS, &|| {
                format!("the color-jittered images of a batch of {n} samples")
            })?;
            for (((d, j), r), at) in c
                .geometry
                .descs
                .iter_mut()
                .zip(c.jitter.iter_mut())
                .zip(c.rest.descs.iter_mut())
                .zip(&mid_at)
            {
                d.dst = m.ptr() + *at as u64;
                j.data = d.dst;
                r.src = d.dst;
            }
            for (r, &k) in c.rest.descs.iter_mut().zip(&c.places) {
                r.dst = place(k);
            }
            mid = Some(m);
        } else {
            for (d, &k) in c.geometry.descs.iter_mut().zip(&c.places) {
                d.dst = place(k);
            }
        }
        self.launch_chain_pass(&c.geometry, c.geometry_samples(), staging, area)?;
        if let Some(st) = &c.stages {
            self.run_jitter(&c.jitter, &st.rest, staging, area)?;
            self.launch_chain_pass(&c.rest, &st.rest, staging, area)?;
        }
        Ok(mid)
    }

    /// Uploads `pass`'s descriptors and taps and launches the chain over `samples` (the
    /// samples `pass` was built from, which size the grid).
    fn launch_chain_pass(
        &self,
        pass: &ChainPass,
        samples: &[FusedSample],
        staging: &mut Staging<'_>,
        area: &mut DescArea,
    ) -> Result<(), Error> {
        let d = self.put_desc(staging, area, as_bytes(&pass.descs))?;
        let t = self.put_desc(staging, area, as_bytes(&pass.taps))?;
        let args = [
            KernelArg::Ptr(d),
            KernelArg::Ptr(t),
            KernelArg::U32(pass.descs.len() as u32),
        ];
        // SAFETY: `launch_chain` pointed each descriptor at its source (its decoded, rebuilt
        // or jittered image in a buffer of this batch, kept until the release event; its
        // window checked by `build_desc`) and at its output (its place in the batch's
        // output, or in the jitter's buffer, laid out for its size); the tables hold its
        // taps; all stay allocated until the batch's ready event.
        unsafe {
            self.dev
                .launch(streams::KERNELS, Kernel::Chain, chain_grid(samples), &args)?
        };
        Ok(())
    }

    /// The jitter between the chain's two launches: a luma sum where contrast needs it, then
    /// each step, for `jitter` (one per sample, in place on the u8 images).
    fn run_jitter(
        &self,
        jitter: &[JitterDesc],
        rest: &[FusedSample],
        staging: &mut Staging<'_>,
        area: &mut DescArea,
    ) -> Result<(), Error> {
        let n = jitter.len();
        let jd = self.put_desc(staging, area, as_bytes(jitter))?;
        let sums = self.put_desc(staging, area, &vec![0u8; 8 * n])?;
        // SAFETY: each jitter descriptor covers its u8 RGB image in the batch's jitter
        // buffer; `sums` holds one u64 per sample (uploaded as zeros); all kept until the
        // release event.
        unsafe { launch_jitter(&*self.dev, streams::KERNELS, jitter, (jd, sums), rest) }
    }
}

/// The dimensions the chain reads a sample's source with (decoded on the device, or on the
/// CPU and uploaded with the batch).
fn decoded_dims(e: &Entry) -> Result<SourceDims, Error> {
    match e {
        Entry::Sample {
            decoded: Some(d), ..
        } => Ok(d.dims),
        Entry::Sample {
            prepared:
                Prepared::Chain {
                    source: Source::Host { image, .. },
                    ..
                },
            ..
        } => Ok(SourceDims {
            height: image.height,
            width: image.width,
            channels: image.channels,
            pitch: image.width * image.channels,
        }),
        other => Err(Error::Cuda(format!(
            "a sample was launched before its decode: {other:?}"
        ))),
    }
}

/// The address the chain reads a sample from.
fn source_ptr(e: &Entry) -> Result<DevicePtr, Error> {
    match e {
        Entry::Sample {
            decoded: Some(d), ..
        } => Ok(d.ptr),
        _ => Err(Error::Cuda(
            "a sample was launched before its decode".into(),
        )),
    }
}

/// The chain's work for a sample, if the chain runs it.
fn chain_sample(e: &Entry) -> Option<FusedSample> {
    match e {
        Entry::Sample {
            prepared: Prepared::Chain { fused, .. },
            ..
        } => Some(*fused),
        _ => None,
    }
}
