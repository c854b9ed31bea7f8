//! Which extra mkfs options `capture` passes on: an allow-list per mkfs, read the way the
//! program's own `getopt` reads its arguments, so that no option can name another file or
//! device for mkfs to write.
//!
//! Each list holds the options of the program's man page (mke2fs(8), mkfs.xfs(8),
//! mkfs.btrfs(8)) whose values are numbers, names or feature lists. Left out, because they
//! name a path or device or read or write one: mke2fs `-d` (root directory), `-l`
//! (bad-blocks file), `-z` (undo file), `-M` (a directory), `-c` (runs badblocks),
//! `-J device=`; mkfs.xfs `-c` (config file), `-p` (protofile), `-d file,name=`,
//! `-l logdev=,name=,file`, `-r rtdev=,name=,file`; mkfs.btrfs `-r`/`--rootdir`,
//! `--subvol`, `--shrink`. Options that make mkfs do nothing (`-n`, `-N`, `-V`) are left
//! out too: the capture needs a file system. Suboptions (`-E`, `-J` and XFS's sections)
//! are checked key by key.

use crate::fs_kind::FsKind;

/// What an option's value may be.
#[derive(Clone, Copy)]
enum Value {
    /// Any text (a size, a label, a feature list).
    Any,
    /// Comma-separated `key` or `key=value` suboptions with these keys.
    Keys(&'static [&'static str]),
}

/// The options one mkfs accepts from `--mkfs-opts`.
struct Allowed {
    program: &'static str,
    /// Short options without a value.
    flags: &'static str,
    /// Short options with a value (attached, `-b4096`, or the next piece, `-b 4096`).
    values: &'static [(char, Value)],
    /// Long options without a value (`--force`).
    long_flags: &'static [&'static str],
    /// Long options with a value (`--nodesize=16384` or `--nodesize 16384`).
    long_values: &'static [(&'static str, Value)],
}

const EXT4_EXTENDED: &[&str] = &[
    "mmp_update_interval",
    "stride",
    "stripe_width",
    "stripe-width",
    "offset",
    "resize",
    "packed_meta_blocks",
    "lazy_itable_init",
    "lazy_journal_init",
    "assume_storage_prezeroed",
    "no_copy_xattrs",
    "num_backup_sb",
    "root_owner",
    "test_fs",
    "discard",
    "nodiscard",
    "quotatype",
    "encoding",
    "encoding_flags",
    "orphan_file_size",
    "hash_seed",
];

const EXT4: Allowed = Allowed {
    program: "mkfs.ext4",
    flags: "jqvDFK",
    values: &[
        ('b', Value::Any),
        ('C', Value::Any),
        ('e', Value::Any),
        ('E', Value::Keys(EXT4_EXTENDED)),
        ('g', Value::Any),
        ('G', Value::Any),
        ('i', Value::Any),
        ('I', Value::Any),
        ('J', Value::Keys(&["size", "fast_commit_size", "location"])),
        ('L', Value::Any),
        ('m', Value::Any),
        ('N', Value::Any),
        ('o', Value::Any),
        ('O', Value::Any),
        ('r', Value::Any),
        ('t', Value::Any),
        ('T', Value::Any),
        ('U', Value::Any),
    ],
    long_flags: &[],
    long_values: &[],
};

const XFS: Allowed = Allowed {
    program: "mkfs.xfs",
    flags: "Kqf",
    values: &[
        ('b', Value::Keys(&["size", "log"])),
        (
            'd',
            Value::Keys(&[
                "agcount",
                "agsize",
                "cowextsize",
                "daxinherit",
                "extszinherit",
                "noalign",
                "projinherit",
                "rtinherit",
                "size",
                "su",
                "sunit",
                "sw",
                "swidth",
                "concurrency",
            ]),
        ),
        (
            'i',
            Value::Keys(&[
                "align",
                "attr",
                "exchange",
                "maxpct",
                "nrext64",
                "perblock",
                "projid32bit",
                "size",
                "sparse",
            ]),
        ),
        (
            'l',
            Value::Keys(&[
                "agnum",
                "concurrency",
                "internal",
                "lazy-count",
                "size",
                "su",
                "sunit",
                "version",
            ]),
        ),
        ('L', Value::Any),
        (
            'm',
            Value::Keys(&[
                "autofsck",
                "bigtime",
                "crc",
                "finobt",
                "inobtcount",
                "metadir",
                "reflink",
                "rmapbt",
                "uuid",
            ]),
        ),
        ('n', Value::Keys(&["ftype", "parent", "size", "version"])),
        (
            'r',
            Value::Keys(&[
                "extsize", "noalign", "rgcount", "rgsize", "rtgroups", "size",
            ]),
        ),
        ('s', Value::Keys(&["size", "log"])),
    ],
    long_flags: &[],
    long_values: &[],
};

const BTRFS: Allowed = Allowed {
    program: "mkfs.btrfs",
    flags: "fMKqv",
    values: &[
        ('b', Value::Any),
        ('d', Value::Any),
        ('L', Value::Any),
        ('m', Value::Any),
        ('n', Value::Any),
        ('O', Value::Any),
        ('R', Value::Any),
        ('s', Value::Any),
        ('U', Value::Any),
    ],
    long_flags: &["force", "mixed", "nodiscard", "quiet", "verbose"],
    long_values: &[
        ("byte-count", Value::Any),
        ("checksum", Value::Any),
        ("csum", Value::Any),
        ("data", Value::Any),
        ("device-uuid", Value::Any),
        ("features", Value::Any),
        ("label", Value::Any),
        ("metadata", Value::Any),
        ("nodesize", Value::Any),
        ("runtime-features", Value::Any),
        ("sectorsize", Value::Any),
        ("uuid", Value::Any),
    ],
};

fn allowed(fs: FsKind) -> &'static Allowed {
    match fs {
        FsKind::Ext4 => &EXT4,
        FsKind::Xfs => &XFS,
        FsKind::Btrfs => &BTRFS,
    }
}

impl Allowed {
    /// The accepted options, for messages.
    fn list(&self) -> String {
        let mut all: Vec<String> = self.flags.chars().map(|c| format!("-{c}")).collect();
        all.extend(self.values.iter().map(|(c, _)| format!("-{c} V")));
        all.extend(self.long_flags.iter().map(|l| format!("--{l}")));
        all.extend(self.long_values.iter().map(|(l, _)| format!("--{l}=V")));
        all.join(" ")
    }

    fn check_value(&self, option: &str, value: &str, v: Value) -> Result<(), String> {
        // mkfs.btrfs -O/-R list-all (and its long forms) print the features and make no
        // file system: the capture would fail later with a misleading mount error.
        if value.split(',').any(|f| f == "list-all") {
            return Err(format!(
                "{} {option} list-all only lists the features and makes no file system",
                self.program
            ));
        }
        let Value::Keys(keys) = v else {
            return Ok(());
        };
        for sub in value.split(',') {
            let key = sub.split_once('=').map_or(sub, |(k, _)| k);
            if !keys.contains(&key) {
                return Err(format!(
                    "{} {option} {key:?} is not accepted (it may name a file or device, or is unknown); {option} takes {}",
                    self.program,
                    keys.join(", ")
                ));
            }
        }
        Ok(())
    }
}

/// Checks `opts` (the pieces of `--mkfs-opts`) for `fs`: every piece an accepted option
/// or the value of the option before it. The message names the piece and what is
/// accepted.
pub fn check(fs: FsKind, opts: &[String]) -> Result<(), String> {
    let a = allowed(fs);
    let refuse = |what: String| {
        Err(format!(
            "{what}; {} accepts {} (options that can name a file or device are refused)",
            a.program,
            a.list()
        ))
    };
    let mut i = 0;
    while i < opts.len() {
        let o = &opts[i];
        i += 1;
        if let Some(long) = o.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            if a.long_flags.contains(&name) && attached.is_none() {
                continue;
            }
            let Some(&(_, v)) = a.long_values.iter().find(|(l, _)| *l == name) else {
                return refuse(format!("{o:?} is not accepted"));
            };
            let value = match attached {
                Some(v) => v,
                None => {
                    let Some(next) = opts.get(i) else {
                        return refuse(format!("{o:?} needs a value"));
                    };
                    i += 1;
                    next.as_str()
                }
            };
            a.check_value(&format!("--{name}"), value, v)?;
            continue;
        }
        let Some(short) = o.strip_prefix('-').filter(|s| !s.is_empty()) else {
            return refuse(format!(
                "{o:?} is not an option (a piece that is not an option's value would be a file or device for mkfs to format)"
            ));
        };
        // getopt: flags may be grouped; the first option that takes a value takes the
        // rest of the piece, or the next piece.
        for (k, c) in short.char_indices() {
            if a.flags.contains(c) {
                continue;
            }
            let Some(&(_, v)) = a.values.iter().find(|(x, _)| *x == c) else {
                return refuse(format!("-{c} (in {o:?}) is not accepted"));
            };
            let rest = &short[k + c.len_utf8()..];
            let value = if !rest.is_empty() {
                rest
            } else {
                let Some(next) = opts.get(i) else {
                    return refuse(format!("-{c} needs a value"));
                };
                i += 1;
                next.as_str()
            };
            a.check_value(&format!("-{c}"), value, v)?;
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn options_with_numbers_names_and_features_pass() {
        for (fs, ok) in [
            (FsKind::Ext4, "-b 4096"),
            (
                FsKind::Ext4,
                "-b4096 -O ^has_journal -E lazy_itable_init=0,nodiscard -L x",
            ),
            (FsKind::Ext4, "-J size=8 -N 1024 -T small -qF"),
            (
                FsKind::Xfs,
                "-b size=4096 -m crc=1,reflink=1 -l size=16m -L lab",
            ),
            (FsKind::Xfs, "-d agcount=4 -i size=512 -n ftype=1"),
            (
                FsKind::Btrfs,
                "--nodesize=16384 -s 4096 --mixed -d single -m dup",
            ),
            (FsKind::Btrfs, "--label x --csum xxhash -O no-holes"),
        ] {
            assert_eq!(check(fs, &pieces(ok)), Ok(()), "{fs:?} {ok}");
        }
    }

    #[test]
    fn options_that_can_name_a_file_or_device_are_refused() {
        for (fs, bad, names) in [
            // The hostile test's: mkfs.xfs wrote into the realtime "device" it was given.
            (FsKind::Xfs, "-rrtdev=/tmp/victim.img", "rtdev"),
            (FsKind::Xfs, "-r rtdev=/tmp/victim.img", "rtdev"),
            (FsKind::Xfs, "-llogdev=/tmp/victim.img", "logdev"),
            (FsKind::Xfs, "-l size=8m,logdev=/dev/sdb", "logdev"),
            (FsKind::Xfs, "-d file,name=/tmp/x", "file"),
            (FsKind::Xfs, "-p /tmp/proto", "-p"),
            (FsKind::Xfs, "-c options=/tmp/cfg", "-c"),
            (FsKind::Ext4, "-Jdevice=/tmp/victim.img", "device"),
            (FsKind::Ext4, "-J size=8,device=/dev/sdb", "device"),
            (FsKind::Ext4, "-d /etc", "-d"),
            (FsKind::Ext4, "-z /tmp/undo", "-z"),
            (FsKind::Ext4, "-l /tmp/bad", "-l"),
            (FsKind::Ext4, "-qd/etc", "-d"),
            (FsKind::Btrfs, "--rootdir=/etc", "--rootdir"),
            (FsKind::Btrfs, "-r /etc", "-r"),
            (FsKind::Btrfs, "--rootdir /etc", "--rootdir"),
            (FsKind::Btrfs, "-O list-all", "list-all"),
            (FsKind::Btrfs, "--features=list-all", "list-all"),
        ] {
            let e = check(fs, &pieces(bad)).unwrap_err();
            assert!(e.contains(names) && e.contains(fs.mkfs().0), "{bad}: {e}");
        }
    }

    #[test]
    fn a_piece_that_is_no_option_s_value_is_refused() {
        for (fs, bad) in [
            (FsKind::Ext4, "-q /some/other.img"),
            (FsKind::Ext4, "4096"),
            (FsKind::Ext4, "-"),
            (FsKind::Ext4, "--"),
            (FsKind::Xfs, "-f /dev/sda"),
            (FsKind::Btrfs, "--force /dev/sdb"),
            (FsKind::Ext4, "-b"),
        ] {
            assert!(check(fs, &pieces(bad)).is_err(), "{fs:?} {bad}");
        }
    }
}
