//! The built-in demo data set: a few dozen small photo-like images that stokehold generates
//! itself (varied sizes, JPEG chroma subsamplings, grayscale, progressive, PNG), so a
//! pipeline runs on a fresh machine with no data at hand.

use std::path::{Path, PathBuf};

use jpeg_encoder::{ColorType, Encoder, SamplingFactor};

use crate::error::Error;
use crate::rng::SampleRng;

/// Version of the generated set; bump when the content changes.
const VERSION: u32 = 1;
/// Classes (sub-folders) in the set.
pub const CLASSES: &[&str] = &["circles", "gradients", "stripes", "checks"];
/// Images per class.
pub const PER_CLASS: usize = 16;

/// The folder the set lives in: `$STOKEHOLD_SAMPLES`, else the system temp folder.
pub fn default_dir() -> PathBuf {
    std::env::var_os("STOKEHOLD_SAMPLES")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(format!("stokehold-samples-v{VERSION}")))
}

/// Makes sure the sample set exists under `dir` (generating it once) and returns `dir`.
pub fn ensure(dir: &Path) -> Result<PathBuf, Error> {
    let marker = dir.join(".complete");
    if marker.exists() {
        return Ok(dir.to_path_buf());
    }
    let io = |path: &Path, e: std::io::Error| Error::Io {
        path: path.to_path_buf(),
        source: e,
    };
    // Build in a private folder, then move into place, so concurrent runs never see half a set.
    let parent = dir.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
    let tmp = parent.join(format!(".stokehold-samples-tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    for (c, class) in CLASSES.iter().enumerate() {
        let cdir = tmp.join(class);
        std::fs::create_dir_all(&cdir).map_err(|e| io(&cdir, e))?;
        for i in 0..PER_CLASS {
            let mut rng = SampleRng::from_key(crate::rng::key(&[0x5a4d, c as u64, i as u64]));
            let w = 64 + rng.below(577) as usize;
            let h = 64 + rng.below(449) as usize;
            let rgb = paint(c, w, h, &mut rng);
            if i == PER_CLASS - 1 {
                let path = cdir.join(format!("{class}_{i:02}.png"));
                write_png(&path, &rgb, w, h).map_err(|e| io(&path, e))?;
                continue;
            }
            let path = cdir.join(format!("{class}_{i:02}.jpg"));
            let (sampling, gray, progressive) = match i % 6 {
                0 => (SamplingFactor::R_4_4_4, false, false),
                1 => (SamplingFactor::R_4_2_2, false, false),
                2 => (SamplingFactor::R_4_2_0, false, true),
                3 => (SamplingFactor::R_4_4_0, false, false),
                4 => (SamplingFactor::R_4_2_0, true, false),
                _ => (SamplingFactor::R_4_2_0, false, false),
            };
            let mut bytes = Vec::new();
            let mut enc = Encoder::new(&mut bytes, 90);
            enc.set_sampling_factor(sampling);
            enc.set_progressive(progressive);
            let result = if gray {
                let g: Vec<u8> = rgb
                    .chunks_exact(3)
                    .map(|p| ((p[0] as u32 * 77 + p[1] as u32 * 150 + p[2] as u32 * 29) >> 8) as u8)
                    .collect();
                enc.encode(&g, w as u16, h as u16, ColorType::Luma)
            } else {
                enc.encode(&rgb, w as u16, h as u16, ColorType::Rgb)
            };
            result.map_err(|e| io(&path, std::io::Error::other(e.to_string())))?;
            std::fs::write(&path, &bytes).map_err(|e| io(&path, e))?;
        }
    }
    std::fs::write(tmp.join(".complete"), b"").map_err(|e| io(&tmp, e))?;
    match std::fs::rename(&tmp, dir) {
        Ok(()) => Ok(dir.to_path_buf()),
        // Another process finished first: use its copy.
        Err(_) if marker.exists() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(dir.to_path_buf())
        }
        Err(e) => Err(io(dir, e)),
    }
}

/// A synthetic picture per class: smooth shapes plus a little noise, like a photo compresses.
fn paint(class: usize, w: usize, h: usize, rng: &mut SampleRng) -> Vec<u8> {
    let base: [f64; 3] = [
        rng.uniform() * 255.0,
        rng.uniform() * 255.0,
        rng.uniform() * 255.0,
    ];
    let (cx, cy) = (rng.uniform() * w as f64, rng.uniform() * h as f64);
    let r = (w.min(h) as f64) * (0.2 + 0.3 * rng.uniform());
    let period = 8.0 + rng.uniform() * 40.0;
    let mut out = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        for x in 0..w {
            let (fx, fy) = (x as f64, y as f64);
            let t = match class {
                0 => f64::from(u8::from(((fx - cx).powi(2) + (fy - cy).powi(2)).sqrt() < r)),
                1 => (fx / w as f64 + fy / h as f64) / 2.0,
                2 => 0.5 + 0.5 * (fx / period).sin(),
                _ => f64::from(u8::from(
                    ((fx / period) as i64 + (fy / period) as i64) % 2 == 0,
                )),
            };
            let noise = (rng.next_u64() % 9) as f64 - 4.0;
            for (k, b) in base.iter().enumerate() {
                let v = b * (1.0 - t) + (255.0 - b) * t + noise + k as f64 * 3.0;
                out.push(v.clamp(0.0, 255.0) as u8);
            }
        }
    }
    out
}

fn write_png(path: &Path, rgb: &[u8], w: usize, h: usize) -> std::io::Result<()> {
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut enc = png::Encoder::new(file, w as u32, h as u32);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header().map_err(std::io::Error::other)?;
    writer
        .write_image_data(rgb)
        .map_err(std::io::Error::other)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_once_and_is_deterministic() {
        let d = tempfile::tempdir().unwrap();
        let a = ensure(&d.path().join("a")).unwrap();
        let b = ensure(&d.path().join("b")).unwrap();
        let files = |p: &Path| {
            let mut v: Vec<(String, Vec<u8>)> = Vec::new();
            for c in CLASSES {
                for e in std::fs::read_dir(p.join(c)).unwrap() {
                    let e = e.unwrap().path();
                    v.push((
                        e.file_name().unwrap().to_string_lossy().into(),
                        std::fs::read(&e).unwrap(),
                    ));
                }
            }
            v.sort();
            v
        };
        let fa = files(&a);
        assert_eq!(fa.len(), CLASSES.len() * PER_CLASS);
        assert_eq!(fa, files(&b));
        // Second call reuses the set.
        ensure(&a).unwrap();
    }
}
