//! Opening a shard for reading, wherever it is: a local file (buffered, seekable) or an
//! http(s) URL (streamed, retried).

use std::io::BufReader;

use super::http::{HttpShard, Retry};
use super::list::Location;
use super::tar::ShardRead;

/// Opens `shard` for reading from its start; the error says why it can't be.
pub fn open_shard(shard: &Location, retry: Retry) -> Result<Box<dyn ShardRead>, String> {
    match shard {
        Location::File(p) => {
            let file = crate::reader::file_io::open_without_blocking(p).map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    "not found (no such file)".to_string()
                } else {
                    e.to_string()
                }
            })?;
            let meta = file.metadata().map_err(|e| e.to_string())?;
            if !meta.is_file() {
                return Err("not a regular file".into());
            }
            // A small buffer: headers, labels and paddings come from it, while a member's
            // data past what it holds is read straight into the sample's bytes (a bigger
            // buffer would copy every image twice).
            Ok(Box::new(BufReader::with_capacity(8 << 10, file)))
        }
        Location::Url(u) => HttpShard::open(u, retry)
            .map(|s| Box::new(s) as Box<dyn ShardRead>)
            .map_err(|e| e.to_string()),
    }
}

impl ShardRead for Box<dyn ShardRead> {
    fn skip(&mut self, n: u64) -> std::io::Result<u64> {
        (**self).skip(n)
    }
}
