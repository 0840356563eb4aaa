//! Shared libraries this process has loaded already: inside a PyTorch program, the cuDNN and
//! NCCL that torch loaded (its own `libcudnn.so.9` and `libnccl.so.2`), which Mercury-rs must
//! use rather than load a second copy (two NCCLs in one process do not share communicators;
//! two cuDNNs of different releases clash over their sub-libraries).

use std::path::PathBuf;

/// The path of a library loaded in this process whose file name is `stem` (`libnccl.so`) or
/// `stem` followed by version numbers (`libnccl.so.2`, `libcudnn.so.9.1.0`), read from
/// `/proc/self/maps`; `None` when there is none (or no `/proc`).
pub fn loaded_library(stem: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    find_in_maps(&maps, stem)
}

/// Where a library Mercury-rs opens by path (cuDNN, NCCL) is looked for, in order, each with
/// where it came from: `$var` when set (a file, or a directory holding one of `names`) and
/// then nothing else (an explicit choice that fails is an error, not a reason to load some
/// other copy silently); else the library of file name `stem` (and version numbers) this
/// process has loaded already (inside PyTorch, torch's), then `names` for the dynamic
/// loader's search.
pub fn candidates(var: &'static str, stem: &str, names: &[&str]) -> Vec<(PathBuf, &'static str)> {
    if let Some(v) = std::env::var_os(var) {
        let p = PathBuf::from(v);
        return if p.is_dir() {
            names.iter().map(|n| (p.join(n), var)).collect()
        } else {
            vec![(p, var)]
        };
    }
    let mut out = Vec::new();
    if let Some(p) = loaded_library(stem) {
        out.push((p, "loaded in this process already"));
    }
    out.extend(
        names
            .iter()
            .map(|n| (PathBuf::from(n), "the dynamic loader's search")),
    );
    out
}

/// [`loaded_library`] over the text of a maps file.
pub fn find_in_maps(maps: &str, stem: &str) -> Option<PathBuf> {
    maps.lines()
        // address perms offset dev inode path: the path is everything from the sixth field on.
        .filter_map(|l| l.split_whitespace().nth(5).map(|_| l))
        .filter_map(|l| l.find('/').map(|i| l[i..].trim_end()))
        .find(|path| {
            let name = path.rsplit('/').next().unwrap_or("");
            name.strip_prefix(stem).is_some_and(|rest| {
                rest.is_empty()
                    || (rest.starts_with('.')
                        && rest[1..]
                            .split('.')
                            .all(|v| v.chars().all(|c| c.is_ascii_digit())))
            })
        })
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_library_torch_loaded() {
        let maps = "\
7f00 r--p 00000000 08:01 1 /venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn_graph.so.9
7f01 r-xp 00000000 08:01 2 /venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9
7f02 r-xp 00000000 08:01 3 /venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2
7f03 rw-p 00000000 00:00 0 [heap]
7f04 r-xp 00000000 08:01 4 /opt/my libs/libnccl-net.so
";
        assert_eq!(
            find_in_maps(maps, "libcudnn.so"),
            Some(PathBuf::from(
                "/venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9"
            ))
        );
        assert_eq!(
            find_in_maps(maps, "libnccl.so"),
            Some(PathBuf::from(
                "/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2"
            ))
        );
        assert_eq!(find_in_maps(maps, "libcublas.so"), None);
        assert_eq!(
            find_in_maps("1 r 0 0 0 /a b/libnccl.so.2.21.5\n", "libnccl.so"),
            Some(PathBuf::from("/a b/libnccl.so.2.21.5"))
        );
    }

    #[test]
    fn this_process_has_no_cudnn() {
        // The test binary links no cuDNN: nothing to find, and no panic.
        assert!(loaded_library("libcudnn_nonexistent.so").is_none());
    }
}
