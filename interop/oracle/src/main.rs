//! The oracle: the reference implementation's verdict on safetensors files,
//! for the Go differential tests in interop/.
//!
//! It runs on many files per process, one JSON object per line of output:
//!
//!     safetensors-oracle check [PATH|DIR]...       verdict and header of each file
//!     safetensors-oracle serialize [IN OUT]...     IN read and written again to OUT
//!
//! Without arguments, each mode reads its operands from standard input, one
//! file (check) or one tab-separated IN and OUT pair (serialize) per line. A
//! directory given to check stands for the files in it, sorted by name.
//!
//! check prints, for each file:
//!
//!     {"path": "...", "ok": true, "error": null, "error_any_of": null, "message": null,
//!      "header_len": 64, "metadata": {"k": "v"} or null,
//!      "tensors": [{"name": "w", "dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, ...]}
//!
//! error is the name of the SafeTensorError variant that
//! SafeTensors::deserialize returns, message its text. The reference sorts
//! tensors by their offsets in hash-map order, so when two tensors have the
//! same offsets its error may depend on the run: error_any_of then lists
//! every variant that some order gives, found by validating each order with
//! the crate's own Metadata::new. Accepted files list their tensors sorted
//! by data_offsets, then name.
//!
//! serialize reads IN with SafeTensors::deserialize and writes its tensors
//! and metadata with the reference writer, serialize_to_file, and prints
//! {"path": IN, "ok": ..., "error": ..., "message": ...}.

use std::collections::{BTreeSet, HashMap};
use std::io::{self, BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};

use safetensors::tensor::{Metadata, TensorInfo};
use safetensors::{SafeTensorError, SafeTensors};
use serde::Deserialize;
use serde_json::{json, Value};

/// The error variant's name, as the conformance corpus and the Go package's
/// documentation spell it.
fn variant(e: &SafeTensorError) -> &'static str {
    use SafeTensorError::*;
    match e {
        InvalidHeader(_) => "InvalidHeader",
        InvalidHeaderDeserialization(_) => "InvalidHeaderDeserialization",
        HeaderTooLarge => "HeaderTooLarge",
        HeaderTooSmall => "HeaderTooSmall",
        InvalidHeaderLength => "InvalidHeaderLength",
        TensorNotFound(_) => "TensorNotFound",
        TensorInvalidInfo => "TensorInvalidInfo",
        InvalidOffset(_) => "InvalidOffset",
        IoError(_) => "IoError",
        JsonError(_) => "JsonError",
        InvalidTensorView(..) => "InvalidTensorView",
        MetadataIncompleteBuffer => "MetadataIncompleteBuffer",
        ValidationOverflow => "ValidationOverflow",
        MisalignedSlice => "MisalignedSlice",
    }
}

/// The same shape as the crate's private HashMetadata, parsed by the same
/// serde_json, to recover the tensor entries of a header whose layout the
/// crate rejects.
#[derive(Deserialize)]
struct Entries {
    #[serde(rename = "__metadata__")]
    #[allow(dead_code)]
    metadata: Option<HashMap<String, String>>,
    #[serde(flatten)]
    tensors: HashMap<String, TensorInfo>,
}

/// The verdicts of every order of the tensors that the reference's sort may
/// produce: entries with equal data_offsets come in hash-map order. The
/// first group of such ties that fails decides, and within it the member
/// that comes first, so trying each member of each group in front covers
/// every outcome.
fn tie_verdicts(header: &str) -> BTreeSet<&'static str> {
    let mut out = BTreeSet::new();
    let Ok(entries) = serde_json::from_str::<Entries>(header) else {
        return out;
    };
    let mut tensors: Vec<(String, TensorInfo)> = entries.tensors.into_iter().collect();
    tensors.sort_by(|a, b| a.1.data_offsets.cmp(&b.1.data_offsets).then(a.0.cmp(&b.0)));
    let mut start = 0;
    while start < tensors.len() {
        let mut end = start + 1;
        while end < tensors.len() && tensors[end].1.data_offsets == tensors[start].1.data_offsets {
            end += 1;
        }
        if end - start > 1 {
            for first in start..end {
                let mut order = tensors.clone();
                order[start..=first].rotate_right(1);
                match Metadata::new(None, order) {
                    Ok(_) => {}
                    Err(e) => {
                        out.insert(variant(&e));
                    }
                }
            }
        }
        start = end;
    }
    out
}

fn header_text(buf: &[u8]) -> Option<&str> {
    let n = u64::from_le_bytes(buf.get(..8)?.try_into().ok()?) as usize;
    std::str::from_utf8(buf.get(8..8usize.checked_add(n)?)?).ok()
}

fn check(path: &Path) -> Value {
    let p = path.to_string_lossy();
    let buf = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => return json!({"path": p, "ok": false, "error": "IoError", "message": e.to_string()}),
    };
    match SafeTensors::read_metadata(&buf) {
        Ok((n, md)) => {
            let mut tensors: Vec<(String, &TensorInfo)> = md.tensors().into_iter().collect();
            tensors.sort_by(|a, b| a.1.data_offsets.cmp(&b.1.data_offsets).then(a.0.cmp(&b.0)));
            let tensors: Vec<Value> = tensors
                .iter()
                .map(|(name, info)| {
                    json!({
                        "name": name,
                        "dtype": info.dtype.to_string(),
                        "shape": info.shape,
                        "data_offsets": [info.data_offsets.0, info.data_offsets.1],
                    })
                })
                .collect();
            // Both entry points give one verdict; check that they agree.
            if let Err(e) = SafeTensors::deserialize(&buf) {
                return json!({"path": p, "ok": false, "error": "Inconsistent", "message": e.to_string()});
            }
            json!({
                "path": p, "ok": true, "error": null, "error_any_of": null, "message": null,
                "header_len": n, "metadata": md.metadata(), "tensors": tensors,
            })
        }
        Err(e) => {
            let name = variant(&e);
            let mut any: BTreeSet<&str> = match e {
                SafeTensorError::InvalidOffset(_)
                | SafeTensorError::ValidationOverflow
                | SafeTensorError::MisalignedSlice
                | SafeTensorError::TensorInvalidInfo => header_text(&buf).map(tie_verdicts).unwrap_or_default(),
                _ => BTreeSet::new(),
            };
            any.insert(name);
            let any: Option<Vec<&str>> = if any.len() > 1 { Some(any.into_iter().collect()) } else { None };
            json!({"path": p, "ok": false, "error": name, "error_any_of": any, "message": e.to_string()})
        }
    }
}

fn serialize(input: &Path, output: &Path) -> Value {
    let p = input.to_string_lossy();
    let result = std::fs::read(input).map_err(SafeTensorError::from).and_then(|buf| {
        let st = SafeTensors::deserialize(&buf)?;
        let (_, md) = SafeTensors::read_metadata(&buf)?;
        safetensors::serialize_to_file(st.tensors(), md.metadata().clone(), output)
    });
    match result {
        Ok(()) => json!({"path": p, "ok": true, "error": null, "message": null}),
        Err(e) => json!({"path": p, "ok": false, "error": variant(&e), "message": e.to_string()}),
    }
}

fn expand(args: &[String]) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for a in args {
        let path = PathBuf::from(a);
        if path.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&path)?
                .map(|e| e.map(|e| e.path()))
                .collect::<io::Result<_>>()?;
            files.retain(|f| f.is_file());
            files.sort();
            out.extend(files);
        } else {
            out.push(path);
        }
    }
    Ok(out)
}

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: safetensors-oracle check [PATH|DIR]... | serialize [IN OUT]...";
    let Some(mode) = args.first() else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let rest = &args[1..];
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut emit = |v: Value| -> io::Result<()> {
        serde_json::to_writer(&mut out, &v)?;
        out.write_all(b"\n")?;
        // One line per file as soon as it is known, for a caller that
        // writes the next operand after reading each answer.
        out.flush()
    };
    match mode.as_str() {
        "check" if !rest.is_empty() => {
            for path in expand(rest)? {
                emit(check(&path))?;
            }
        }
        "check" => {
            for line in io::stdin().lock().lines() {
                emit(check(Path::new(&line?)))?;
            }
        }
        "serialize" if !rest.is_empty() => {
            if rest.len() % 2 != 0 {
                eprintln!("{usage}");
                std::process::exit(2);
            }
            for pair in rest.chunks(2) {
                emit(serialize(Path::new(&pair[0]), Path::new(&pair[1])))?;
            }
        }
        "serialize" => {
            for line in io::stdin().lock().lines() {
                let line = line?;
                let Some((input, output)) = line.split_once('\t') else {
                    eprintln!("serialize: want IN<TAB>OUT, got {line:?}");
                    std::process::exit(2);
                };
                emit(serialize(Path::new(input), Path::new(output)))?;
            }
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
    Ok(())
}
