//! A shard's samples: consecutive members sharing a key (`n0123.jpg` + `n0123.cls`) make one
//! sample; its image is the member with one of the reader's extensions, its label comes from
//! the `.cls` member (an integer) or a field of the `.json` member. Every group of members is
//! exactly one item, good or damaged, so that a shard's item count does not depend on what
//! was loaded.

use crate::error::{DecodeError, SampleErrorKind};

use super::tar::{MemberKind, ShardRead, TarError, TarReader};

/// Where a sample's label comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelFrom {
    /// No label (-1).
    None,
    /// The integer text of the member with this extension (`cls`).
    Text(String),
    /// A field of the `.json` member (`a.b` for nested objects).
    Json(String),
}

/// How a shard's members become samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleRules {
    /// Image extensions (lower-case, without the dot), preferred in this order.
    pub extensions: Vec<String>,
    /// The label's source.
    pub label: LabelFrom,
    /// Image members over this many bytes are refused unread.
    pub max_bytes: u64,
}

/// One item of a shard: a sample, or why a group of members is no sample.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A good sample.
    Sample {
        /// The image member's name.
        member: String,
        /// Its bytes (empty when not loaded).
        image: Vec<u8>,
        /// Its label (-1 without one).
        label: i64,
    },
    /// Members that make no sample, named by the member at fault.
    Damaged {
        /// The member (or key, or `@offset` where no name could be read).
        member: String,
        /// Why.
        kind: SampleErrorKind,
    },
}

/// A sample's key and extension as WebDataset splits a member name: the key is everything up
/// to the first dot of the last path component, the extension the rest.
///
/// ```
/// use stokehold::reader::shards::samples::split_name;
/// assert_eq!(split_name("a/n0123.seg.png"), ("a/n0123", "seg.png"));
/// assert_eq!(split_name("README"), ("README", ""));
/// ```
pub fn split_name(name: &str) -> (&str, &str) {
    let base_start = name.rfind('/').map_or(0, |i| i + 1);
    match name[base_start..].find('.') {
        Some(dot) => (&name[..base_start + dot], &name[base_start + dot + 1..]),
        None => (name, ""),
    }
}

fn damage(member: impl Into<String>, why: impl Into<String>) -> Item {
    Item::Damaged {
        member: member.into(),
        kind: SampleErrorKind::Read(why.into()),
    }
}

/// The items of one shard, read front to back.
pub struct ShardItems<R> {
    tar: TarReader<R>,
    rules: std::sync::Arc<SampleRules>,
    /// The header read ahead of the group it starts.
    peeked: Option<Result<super::tar::Member, TarError>>,
    done: bool,
    /// What ended the stream before its end-of-archive, as reported in its item.
    cut: Option<String>,
    /// The stream is no tar at all.
    not_tar: bool,
}

impl<R: ShardRead> ShardItems<R> {
    /// The items of the shard in `read`.
    pub fn new(read: R, rules: std::sync::Arc<SampleRules>) -> ShardItems<R> {
        ShardItems {
            tar: TarReader::new(read),
            rules,
            peeked: None,
            done: false,
            cut: None,
            not_tar: false,
        }
    }

    /// Whether the stream turned out to be no tar file (its first item said so).
    pub fn not_tar(&self) -> bool {
        self.not_tar
    }

    /// Why the stream ended early (truncated, unreadable), once an item reported it: the
    /// member or byte and the cause, e.g. `n0123.jpg: tar stream truncated at byte 8192`.
    pub fn cut(&self) -> Option<&str> {
        self.cut.as_deref()
    }

    /// Records `item` as the one that ended the stream, when the stream has ended.
    fn note_cut(&mut self, item: Item) -> Item {
        if self.tar.ended_early() && self.cut.is_none() {
            if let Item::Damaged { member, kind } = &item {
                let why = match kind {
                    SampleErrorKind::Read(why) => why.clone(),
                    other => other.to_string(),
                };
                self.cut = Some(format!("{member}: {why}"));
            }
        }
        item
    }

    /// The next header that is a file (or damage); `None` at the end.
    fn header(&mut self) -> Option<Result<super::tar::Member, TarError>> {
        if let Some(p) = self.peeked.take() {
            return Some(p);
        }
        if self.done {
            return None;
        }
        loop {
            match self.tar.next_member() {
                Ok(None) => {
                    self.done = true;
                    return None;
                }
                Ok(Some(m)) if m.kind == MemberKind::Other => continue,
                Ok(Some(m)) => return Some(Ok(m)),
                Err(e) => {
                    if e.is_fatal() {
                        self.done = true;
                    }
                    return Some(Err(e));
                }
            }
        }
    }

    /// The next item; with `load` false the image is not read (counting, skipping). Either
    /// way a shard gives the same items: a member whose data the stream cuts short is one
    /// damaged item.
    pub fn next_item(&mut self, load: bool) -> Option<Item> {
        let item = self.item(load)?;
        Some(self.note_cut(item))
    }

    fn item(&mut self, load: bool) -> Option<Item> {
        let first = self.header()?;
        let first = match first {
            Ok(m) => m,
            Err(TarError::BadHeader {
                offset,
                name: None,
                why,
            }) => {
                return Some(damage(
                    format!("@{offset}"),
                    format!("broken tar header: {why}"),
                ))
            }
            Err(TarError::BadHeader {
                name: Some(name),
                why,
                offset,
            }) => {
                // The damaged member joins its key's group, which it spoils.
                let key = split_name(&name).0.to_string();
                let cause = format!("broken tar header at byte {offset}: {why}");
                return Some(self.group(key, None, Some((name, cause)), load));
            }
            Err(e @ TarError::NotTar { .. }) => {
                self.not_tar = true;
                return Some(damage("@0", e.to_string()));
            }
            Err(e) => return Some(damage(format!("@{}", self.tar.position()), e.to_string())),
        };
        let key = split_name(&first.name).0.to_string();
        Some(self.group(key, Some(first), None, load))
    }

    /// Reads the members of `key`'s group, starting with `first`.
    fn group(
        &mut self,
        key: String,
        mut member: Option<super::tar::Member>,
        mut spoiled: Option<(String, String)>,
        load: bool,
    ) -> Item {
        let rules = self.rules.clone();
        // (preference, name, bytes or the size over the limit)
        let mut image: Option<(usize, String, Result<Vec<u8>, u64>)> = None;
        let mut label_text: Option<(String, Vec<u8>)> = None;
        let label_ext = match &rules.label {
            LabelFrom::None => None,
            LabelFrom::Text(e) => Some(e.as_str()),
            LabelFrom::Json(_) => Some("json"),
        };
        loop {
            if let Some(m) = member.take() {
                let ext = split_name(&m.name).1.to_ascii_lowercase();
                let pref = rules.extensions.iter().position(|e| *e == ext);
                let read = if let Some(p) = pref.filter(|&p| image.as_ref().is_none_or(|i| p < i.0))
                {
                    if load {
                        self.tar
                            .read_data(rules.max_bytes)
                            .map(|d| image = Some((p, m.name.clone(), d)))
                    } else {
                        // Refused by its size unread, as a load refuses it.
                        let bytes = match m.size > rules.max_bytes {
                            true => Err(m.size),
                            false => Ok(Vec::new()),
                        };
                        image = Some((p, m.name.clone(), bytes));
                        Ok(())
                    }
                } else if label_ext == Some(ext.as_str()) && label_text.is_none() {
                    self.tar.read_data(64 * 1024).map(|d| {
                        label_text = Some((m.name.clone(), d.unwrap_or_default()));
                    })
                } else {
                    Ok(())
                };
                // Data not read is skipped here rather than with the next header, so that
                // a stream ending inside it spoils this group whether or not it was loaded.
                if let Err(e) = read.and_then(|()| self.tar.skip_data()) {
                    // The stream ended inside this group.
                    spoiled.get_or_insert((m.name.clone(), e.to_string()));
                    break;
                }
            }
            match self.header() {
                None => break,
                Some(Ok(m)) if split_name(&m.name).0 == key => member = Some(m),
                Some(Err(TarError::BadHeader {
                    name: Some(name),
                    why,
                    offset,
                })) if split_name(&name).0 == key => {
                    spoiled.get_or_insert((
                        name,
                        format!("broken tar header at byte {offset}: {why}"),
                    ));
                }
                // Another key, or the stream's end: the group is complete as far as it
                // goes (a member lost to truncation shows as missing), and a truncation
                // is an item of its own.
                Some(other) => {
                    self.peeked = Some(other);
                    break;
                }
            }
        }
        if let Some((member, why)) = spoiled {
            return damage(member, why);
        }
        let Some((_, member, bytes)) = image else {
            return damage(
                key,
                format!(
                    "no image member (extensions: {})",
                    rules.extensions.join(", ")
                ),
            );
        };
        let image = match bytes {
            Ok(b) => b,
            Err(size) => {
                return Item::Damaged {
                    member,
                    kind: SampleErrorKind::Decode(DecodeError::Limits(format!(
                        "member is {size} bytes, over the limit of {} (max_file_bytes)",
                        rules.max_bytes
                    ))),
                }
            }
        };
        let label = match (&rules.label, label_text) {
            (LabelFrom::None, _) => -1,
            (LabelFrom::Text(ext), None) | (LabelFrom::Json(ext), None) => {
                let ext = if matches!(rules.label, LabelFrom::Json(_)) {
                    "json"
                } else {
                    ext
                };
                return damage(member, format!("no .{ext} member (the label)"));
            }
            (LabelFrom::Text(_), Some((name, text))) => {
                match std::str::from_utf8(&text)
                    .ok()
                    .and_then(|t| t.trim().parse::<i64>().ok())
                {
                    Some(l) => l,
                    None => return damage(name, "the label is not an integer"),
                }
            }
            (LabelFrom::Json(field), Some((name, text))) => match json_label(&text, field) {
                Ok(l) => l,
                Err(why) => return damage(name, why),
            },
        };
        Item::Sample {
            member,
            image,
            label,
        }
    }
}

/// The integer at `field` (dots separate nested names) of a JSON document.
fn json_label(text: &[u8], field: &str) -> Result<i64, String> {
    let doc: serde_json::Value =
        serde_json::from_slice(text).map_err(|e| format!("the .json member is not JSON: {e}"))?;
    let mut v = &doc;
    for part in field.split('.') {
        v = v
            .get(part)
            .ok_or_else(|| format!("the .json member has no field '{field}'"))?;
    }
    match v {
        serde_json::Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
            .ok_or_else(|| format!("field '{field}' = {n} is not an integer")),
        serde_json::Value::String(s) => s
            .trim()
            .parse()
            .map_err(|_| format!("field '{field}' = \"{s}\" is not an integer")),
        other => Err(format!("field '{field}' = {other} is not an integer")),
    }
}
