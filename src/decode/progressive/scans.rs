//! Entropy decoding of one progressive scan into a frame's coefficients: DC and AC, first
//! and refinement scans, restarts, with the refinement scans' zero skipping done by `pdep`
//! where the CPU has a fast one.

use super::super::huffman::{extend, table, BitReader, HuffTable, Unsupported, R};
use super::frame::{ac_buffer, Component, Frame, Scan};

/// What decoding one scan needs besides the frame and the reader.
#[derive(Clone, Copy)]
pub(super) struct ScanJob<'a> {
    pub(super) scan: &'a Scan,
    /// The Huffman tables in the scan's DC and AC slots.
    pub(super) dc_tables: &'a [Option<&'a HuffTable>; 4],
    pub(super) ac_tables: &'a [Option<&'a HuffTable>; 4],
    pub(super) restart_interval: usize,
    /// Decode down to this MCU row.
    pub(super) mcu_rows_needed: usize,
}

/// Decodes one scan into `f`'s coefficients, down to MCU row `job.mcu_rows_needed`: with
/// the refinement scans' zero skipping done by one `pdep` instruction where the CPU has a
/// fast one (see [`fast_pdep`]), else by a loop.
pub(super) fn decode_scan(f: &mut Frame, job: &ScanJob<'_>, r: &mut BitReader<'_>) -> R<()> {
    #[cfg(target_arch = "x86_64")]
    if fast_pdep() {
        // SAFETY: fast_pdep() is true only when the CPU has BMI2, all decode_scan_bmi2 needs.
        return unsafe { decode_scan_bmi2(f, job, r) };
    }
    decode_scan_with::<false>(f, job, r)
}

/// [`decode_scan_with`] compiled for BMI2, with `pdep`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "bmi2")]
unsafe fn decode_scan_bmi2(f: &mut Frame, job: &ScanJob<'_>, r: &mut BitReader<'_>) -> R<()> {
    decode_scan_with::<true>(f, job, r)
}

/// Whether this CPU has a fast `pdep` (BMI2): Intel's since Haswell and AMD's since Zen 3.
/// AMD's earlier ones microcode it at up to hundreds of cycles, slower than the loop.
#[cfg(target_arch = "x86_64")]
fn fast_pdep() -> bool {
    #[cfg(test)]
    if NO_PDEP.with(|n| n.get()) {
        return false;
    }
    static FAST: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FAST.get_or_init(|| {
        if !std::arch::is_x86_feature_detected!("bmi2") {
            return false;
        }
        // SAFETY: every x86-64 CPU has CPUID (the intrinsic is safe from Rust 1.87 on).
        #[allow(unused_unsafe)]
        let (vendor, signature) = unsafe {
            let v = std::arch::x86_64::__cpuid(0);
            (
                [
                    v.ebx.to_le_bytes(),
                    v.edx.to_le_bytes(),
                    v.ecx.to_le_bytes(),
                ]
                .concat(),
                std::arch::x86_64::__cpuid(1).eax,
            )
        };
        let base_family = (signature >> 8) & 0xF;
        let family = if base_family == 0xF {
            base_family + ((signature >> 20) & 0xFF)
        } else {
            base_family
        };
        let slow = matches!(&vendor[..], b"AuthenticAMD" | b"HygonGenuine") && family < 0x19;
        !slow
    })
}

#[cfg(test)]
thread_local! {
    /// Tests set it to run the loop instead of `pdep` on a CPU that has a fast one.
    pub(in crate::decode) static NO_PDEP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[inline(always)]
fn decode_scan_with<const PDEP: bool>(
    f: &mut Frame,
    job: &ScanJob<'_>,
    r: &mut BitReader<'_>,
) -> R<()> {
    let ScanJob {
        scan,
        dc_tables,
        ac_tables,
        restart_interval,
        mcu_rows_needed,
    } = *job;
    // Storage for the rows needed, allocated on first use.
    let nc = f.comps.len();
    for &(ci, _, _) in &scan.comps {
        let c = &mut f.comps[ci];
        if c.coefs.is_empty() {
            c.rows_stored = if nc == 1 {
                mcu_rows_needed.min(c.height_blocks)
            } else {
                mcu_rows_needed * c.v
            };
            let blocks = c.rows_stored * c.stride_blocks;
            c.coefs = ac_buffer(blocks * 64);
            c.dc = vec![0i16; blocks];
            c.nonzero = vec![0u64; blocks];
        }
    }
    let mut restarts = Restarts {
        interval: restart_interval,
        left: restart_interval,
        next: 0,
    };
    let mut st = ScanState {
        eobrun: 0,
        preds: [0; 4],
    };
    if scan.comps.len() == 1 {
        let (ci, td, ta) = scan.comps[0];
        let c = &mut f.comps[ci];
        let (al, ss, se) = (scan.al, scan.ss, scan.se);
        if scan.ss == 0 && scan.ah == 0 {
            let t = table(dc_tables, td)?;
            each_dc(c, r, &mut restarts, &mut st, |r, dc, st| {
                dc_first_block(r, t, &mut st.preds[0], al, dc)
            })?;
        } else if scan.ss == 0 {
            each_dc(c, r, &mut restarts, &mut st, |r, dc, _| {
                if r.bit() {
                    *dc |= 1 << al;
                }
                Ok(())
            })?;
        } else if scan.ah == 0 {
            let t = table(ac_tables, ta)?;
            each_block(c, r, &mut restarts, &mut st, |r, b, nz, st| {
                ac_first_block(r, t, ss, se, al, &mut st.eobrun, b, nz)
            })?;
        } else {
            let t = table(ac_tables, ta)?;
            each_block(c, r, &mut restarts, &mut st, |r, b, nz, st| {
                ac_refine_block::<PDEP>(r, t, ss, se, al, &mut st.eobrun, b, nz)
            })?;
        }
    } else {
        // Interleaved: DC scans only (checked in parse_sos).
        let dc_first = scan.ah == 0;
        let mut dcts = Vec::with_capacity(scan.comps.len());
        for &(_, td, _) in &scan.comps {
            dcts.push(if dc_first {
                Some(table(dc_tables, td)?)
            } else {
                None
            });
        }
        for my in 0..mcu_rows_needed.min(f.mcus_y) {
            for mx in 0..f.mcus_x {
                restarts.before_mcu(r, &mut st)?;
                for (si, &(ci, _, _)) in scan.comps.iter().enumerate() {
                    let c = &mut f.comps[ci];
                    for y in 0..c.v {
                        for x in 0..c.h {
                            let b = (my * c.v + y) * c.stride_blocks + mx * c.h + x;
                            let dc = c.dc.get_mut(b).ok_or(Unsupported)?;
                            if let Some(t) = dcts[si] {
                                dc_first_block(r, t, &mut st.preds[si], scan.al, dc)?;
                            } else if r.bit() {
                                *dc |= 1 << scan.al;
                            }
                        }
                    }
                }
            }
        }
    }
    r.check_no_padding_used()
}

/// End-of-band run and DC predictions, reset at each restart.
struct ScanState {
    eobrun: u32,
    preds: [i32; 4],
}

/// Restart-interval bookkeeping of a scan.
struct Restarts {
    interval: usize,
    left: usize,
    next: u8,
}

impl Restarts {
    #[inline(always)]
    fn before_mcu(&mut self, r: &mut BitReader<'_>, st: &mut ScanState) -> R<()> {
        if self.interval > 0 {
            if self.left == 0 {
                r.restart(self.next)?;
                self.next = (self.next + 1) & 7;
                self.left = self.interval;
                st.eobrun = 0;
                st.preds = [0; 4];
            }
            self.left -= 1;
        }
        Ok(())
    }
}

/// Runs `decode` on the AC coefficients and nonzero mask of every block of a one-component scan
/// down to the rows stored, in scan order (monomorphised per scan kind, so the per-block
/// loop has no dispatch).
#[inline(always)]
fn each_block<F>(
    c: &mut Component,
    r: &mut BitReader<'_>,
    restarts: &mut Restarts,
    st: &mut ScanState,
    mut decode: F,
) -> R<()>
where
    F: FnMut(&mut BitReader<'_>, &mut [i16; 64], &mut u64, &mut ScanState) -> R<()>,
{
    let rows = c.height_blocks.min(c.rows_stored);
    let (stride, width) = (c.stride_blocks, c.width_blocks);
    for by in 0..rows {
        let row = &mut c.coefs[by * stride * 64..(by * stride + width) * 64];
        let nz_row = &mut c.nonzero[by * stride..by * stride + width];
        for (block, nz) in row.chunks_exact_mut(64).zip(nz_row.iter_mut()) {
            restarts.before_mcu(r, st)?;
            let block: &mut [i16; 64] = block.try_into().map_err(|_| Unsupported)?;
            decode(r, block, nz, st)?;
        }
    }
    Ok(())
}

/// [`each_block`] for the DC coefficients.
#[inline(always)]
fn each_dc<F>(
    c: &mut Component,
    r: &mut BitReader<'_>,
    restarts: &mut Restarts,
    st: &mut ScanState,
    mut decode: F,
) -> R<()>
where
    F: FnMut(&mut BitReader<'_>, &mut i16, &mut ScanState) -> R<()>,
{
    let rows = c.height_blocks.min(c.rows_stored);
    let (stride, width) = (c.stride_blocks, c.width_blocks);
    for by in 0..rows {
        for dc in &mut c.dc[by * stride..by * stride + width] {
            restarts.before_mcu(r, st)?;
            decode(r, dc, st)?;
        }
    }
    Ok(())
}

#[inline(always)]
fn dc_first_block(
    r: &mut BitReader<'_>,
    t: &HuffTable,
    pred: &mut i32,
    al: u8,
    dc: &mut i16,
) -> R<()> {
    let s = u32::from(r.decode(t)?);
    if s > 11 {
        return Err(Unsupported);
    }
    let diff = if s > 0 { extend(r.get(s), s) } else { 0 };
    *pred = pred.wrapping_add(diff);
    *dc = (*pred << al) as i16;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn ac_first_block(
    r: &mut BitReader<'_>,
    t: &HuffTable,
    ss: usize,
    se: usize,
    al: u8,
    eobrun: &mut u32,
    block: &mut [i16; 64],
    nz: &mut u64,
) -> R<()> {
    if *eobrun > 0 {
        *eobrun -= 1;
        return Ok(());
    }
    let mut k = ss;
    while k <= se {
        let rs = r.decode(t)?;
        let (run, s) = (usize::from(rs >> 4), u32::from(rs & 15));
        if s != 0 {
            k += run;
            if k > se || s > 10 {
                return Err(Unsupported);
            }
            let v = (extend(r.get(s), s) << al) as i16;
            block[k & 63] = v;
            *nz |= u64::from(v != 0) << k;
        } else if run == 15 {
            k += 15;
        } else {
            *eobrun = eob_run(r, run as u32) - 1;
            break;
        }
        k += 1;
    }
    Ok(())
}

/// The length of an end-of-band run with symbol run `run` (0..=14): 2^run plus `run`
/// appended bits.
#[inline(always)]
fn eob_run(r: &mut BitReader<'_>, run: u32) -> u32 {
    let mut n = 1u32 << run;
    if run > 0 {
        n += r.get(run);
    }
    n
}

/// `bits` less its `n` lowest set bits.
#[inline(always)]
pub(super) fn skip_lowest<const PDEP: bool>(bits: u64, n: u32) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if PDEP {
        // SAFETY: PDEP is true only in the code decode_scan_bmi2 runs (BMI2 detected).
        return unsafe { std::arch::x86_64::_pdep_u64(u64::MAX << n, bits) };
    }
    let mut bits = bits;
    for _ in 0..n {
        bits &= bits.wrapping_sub(1);
    }
    bits
}

/// Bits `from..=to` set.
#[inline(always)]
fn band(from: usize, to: usize) -> u64 {
    (u64::MAX << from) & (u64::MAX >> (63 - to))
}

/// Successive-approximation corrections: one bit for each coefficient in `mask` (already
/// nonzero), in zigzag order; a 1 adds `p1` to its magnitude unless that bit is already set.
#[inline(always)]
fn correct(r: &mut BitReader<'_>, block: &mut [i16; 64], mut mask: u64, p1: i16) {
    let mut n = mask.count_ones();
    while n > 0 {
        let take = n.min(32);
        let mut bits = r.get(take) << (32 - take);
        n -= take;
        if bits == 0 && n == 0 {
            return;
        }
        for _ in 0..take {
            let k = mask.trailing_zeros() as usize & 63;
            mask &= mask - 1;
            let c = block[k];
            // Branch-free: the correction bits are close to random.
            let add = (bits >> 31) as i16 & i16::from(c & p1 == 0);
            block[k] = c.wrapping_add(add * ((c >> 15) | 1) * p1);
            bits <<= 1;
        }
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn ac_refine_block<const PDEP: bool>(
    r: &mut BitReader<'_>,
    t: &HuffTable,
    ss: usize,
    se: usize,
    al: u8,
    eobrun: &mut u32,
    block: &mut [i16; 64],
    nz: &mut u64,
) -> R<()> {
    let p1: i16 = 1 << al;
    let mut k = ss;
    if *eobrun == 0 {
        while k <= se {
            let rs = r.decode(t)?;
            let run = u32::from(rs >> 4);
            let s = rs & 15;
            let mut value = 0i16;
            if s != 0 {
                if s != 1 {
                    return Err(Unsupported);
                }
                value = if r.bit() { p1 } else { -p1 };
            } else if run != 15 {
                *eobrun = eob_run(r, run);
                break;
            }
            // Pass `run` zero coefficients (correcting the nonzero ones on the way) and
            // stop at the next zero: the new value goes there (ZRL: it is the 16th zero,
            // passed over).
            let rest = band(k, se);
            let zeros = skip_lowest::<PDEP>(rest & !*nz, run);
            if zeros == 0 {
                // Fewer zeros left than the run: the band ends first.
                correct(r, block, *nz & rest, p1);
                if value != 0 {
                    return Err(Unsupported);
                }
                k = se + 1;
            } else {
                let z = zeros.trailing_zeros() as usize;
                correct(r, block, *nz & rest & !(u64::MAX << z), p1);
                if value != 0 {
                    block[z & 63] = value;
                    *nz |= 1 << z;
                }
                k = z + 1;
            }
        }
    }
    if *eobrun > 0 {
        // The rest of the band is in an end-of-band run: only corrections.
        if k <= se {
            correct(r, block, *nz & band(k, se), p1);
        }
        *eobrun -= 1;
    }
    Ok(())
}
