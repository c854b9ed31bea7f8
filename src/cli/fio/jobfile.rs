//! fio job files, read only to check them: which options flashlab honours, which it
//! refuses (by name, with the reason), and the job file handed to the real fio, whose
//! null engine writes each job's I/O log. fio itself defines the I/O; nothing here
//! interprets rw, bs, size or the random distributions.
//!
//! The syntax is fio's ini format: `[name]` sections, `key=value` or `key` lines, `;` and
//! `#` comment lines. A `[global]` section's options apply to the jobs after it, as in fio.

use anyhow::{bail, Result};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Options that shape the I/O: fio turns them into the iolog (the first group) or the
/// replay applies them (iodepth, numjobs).
pub(crate) const HONOURED: &[&str] = &[
    "rw",
    "readwrite",
    "bs",
    "blocksize",
    "bssplit",
    "bsrange",
    "blocksize_range",
    "blockalign",
    "ba",
    "size",
    "io_size",
    "io_limit",
    "offset",
    "number_ios",
    "loops",
    "rwmixread",
    "rwmixwrite",
    "random_distribution",
    "norandommap",
    "randseed",
    "randrepeat",
    "fsync",
    "fdatasync",
    "iodepth",
    "numjobs",
];

/// Options taken but replaced by what flashlab does instead (the reasons are in
/// docs/commands/fio.md): the job's name and description, the engine (the simulated drive),
/// direct I/O (there is no page cache: always direct), the file (the drive, addressed as
/// a raw device), threads or processes, and group_reporting (honoured in the report).
pub(crate) const ACCEPTED: &[&str] = &[
    "name",
    "description",
    "ioengine",
    "direct",
    "buffered",
    "filename",
    "directory",
    "thread",
    "group_reporting",
];

/// Options fio's job gets from flashlab, never from the job file (`filename` is kept: see
/// [`fio_job_text`]).
const REPLACED: &[&str] = &[
    "iodepth",
    "numjobs",
    "name",
    "description",
    "ioengine",
    "direct",
    "buffered",
    "directory",
    "thread",
    "group_reporting",
];

/// Most jobs one job file may run (numjobs clones counted): each job's I/O log is read on
/// a thread of its own, a few MB of requests ahead of the replay (256 jobs: 0.55 GB peak
/// memory).
pub(crate) const MAX_JOBS: u32 = 256;

/// Longest line written into fio's job file (fio's own buffer holds 8 KiB).
const MAX_FIO_LINE_BYTES: usize = 4096;

/// Largest job file read.
const MAX_JOB_FILE_BYTES: u64 = 1 << 20;

/// One `key` or `key=value` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Opt {
    pub(crate) key: String,
    pub(crate) value: Option<String>,
    /// The job file's line it came from (1-based), for errors found after the section.
    pub(crate) line_no: usize,
}

impl Opt {
    fn line(&self) -> String {
        match &self.value {
            Some(v) => format!("{}={v}", self.key),
            None => self.key.clone(),
        }
    }
}

/// A job section, with the options of the `[global]` sections before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Job {
    /// The job's name: its section's, or its `name` option's (fio's job file gets it as
    /// the section's name, so fio's errors name the job).
    pub(crate) name: String,
    /// The global options, then the job's own, in order (a later one wins in fio).
    pub(crate) options: Vec<Opt>,
    /// The job's own options (fio's JSON lists them as "job options").
    pub(crate) own: Vec<Opt>,
    pub(crate) iodepth: u32,
    pub(crate) numjobs: u32,
    /// Whether `size` is given (if not, the job covers the whole drive, as fio on a raw
    /// device would).
    pub(crate) has_size: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobFile {
    pub(crate) jobs: Vec<Job>,
    /// Every `[global]` option, in order.
    pub(crate) global: Vec<Opt>,
    /// Whether any job asks for group_reporting: fio then reports all jobs as one.
    pub(crate) group_reporting: bool,
}

/// Why an option is refused, for those users often have in job files.
fn refusal(key: &str) -> Option<&'static str> {
    Some(match key {
        "time_based" | "runtime" | "ramp_time" => {
            "fio's null engine, which writes the job's I/O log, would run it for wall-clock \
             seconds at this machine's speed, so the amount of I/O would measure the CPU, not \
             the drive; bound the job with size, io_size or number_ios"
        }
        "startdelay" => "every job starts at time 0 of the simulation",
        "stonewall" | "wait_for" | "new_group" => {
            "all jobs of a job file run at once on one simulated drive; put the jobs that \
             should run after the others in a job file of their own"
        }
        "rate"
        | "rate_iops"
        | "rate_min"
        | "rate_iops_min"
        | "rate_process"
        | "rate_cycle"
        | "rate_ignore_thinktime" => {
            "requests issue as soon as one of the job's iodepth slots frees (closed loop); \
             rate limits are not modelled"
        }
        "thinktime"
        | "thinktime_blocks"
        | "thinktime_spin"
        | "thinktime_blocks_type"
        | "thinktime_iotime" => {
            "requests issue as soon as one of the job's iodepth slots frees; think times are \
             not modelled"
        }
        "iodepth_batch"
        | "iodepth_batch_submit"
        | "iodepth_batch_complete"
        | "iodepth_batch_complete_min"
        | "iodepth_batch_complete_max"
        | "iodepth_low" => {
            "the replay keeps iodepth requests in flight at all times; fio's batching is not \
             modelled"
        }
        "read_iolog" | "replay_no_stall" | "replay_redirect" | "replay_align" | "replay_scale"
        | "replay_time_scale" | "replay_skip" => {
            "to replay an iolog, use `flashlab replay LOG --format fio`"
        }
        "write_iolog" | "write_bw_log" | "write_lat_log" | "write_iops_log" | "write_hist_log"
        | "log_avg_msec" | "log_hist_msec" => {
            "flashlab writes fio's I/O log itself and keeps no per-interval logs"
        }
        "nrfiles" | "openfiles" | "file_service_type" | "filesize" | "filename_format"
        | "unique_filename" => {
            "each job addresses the simulated drive as one raw device: one file per job"
        }
        "offset_increment" => {
            "it counts numjobs' clones, which flashlab runs as separate fio jobs (each needs \
             an I/O log of its own); give each clone a job section with its own offset"
        }
        "zonemode" | "zonesize" | "zonerange" | "zoneskip" | "zonecapacity" => {
            "zoned I/O is not modelled"
        }
        "percentile_list"
        | "clat_percentiles"
        | "lat_percentiles"
        | "slat_percentiles"
        | "unified_rw_reporting"
        | "kb_base"
        | "unit_base" => {
            "the report uses fio's defaults (the default percentile list, per-direction \
             numbers, 1024-based units)"
        }
        "include" => "included job files are not read",
        v if v.starts_with("verify") || v == "do_verify" || v.starts_with("trim_") => {
            "verification reads data back and compares it; the simulated drive keeps no data"
        }
        "cpus_allowed"
        | "cpus_allowed_policy"
        | "cpumask"
        | "nice"
        | "prio"
        | "prioclass"
        | "numa_cpu_nodes"
        | "numa_mem_policy"
        | "gtod_reduce"
        | "clocksource" => {
            "it changes how fio's process runs, not the I/O the drive sees; remove it"
        }
        _ => return None,
    })
}

fn unsupported(key: &str) -> String {
    let why = refusal(key).map_or_else(
        || {
            format!(
                "it honours {} and accepts {} (see `flashlab fio --help`)",
                HONOURED.join(", "),
                ACCEPTED.join(", ")
            )
        },
        str::to_string,
    );
    format!("option `{key}` is not supported by flashlab fio: {why}")
}

fn parse_count(key: &str, v: Option<&str>, max: u32) -> Result<u32, String> {
    let v = v.ok_or_else(|| format!("{key} needs a value, e.g. {key}=4"))?;
    match v.trim().parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "{key}={v}: expected a whole number from 1 to {max}"
        )),
    }
}

/// fio's boolean: 1/0, true/false, yes/no, on/off; a bare key is true.
fn parse_bool(key: &str, v: Option<&str>) -> Result<bool, String> {
    match v.map(|s| s.trim().to_ascii_lowercase()).as_deref() {
        None | Some("1" | "true" | "yes" | "on") => Ok(true),
        Some("0" | "false" | "no" | "off") => Ok(false),
        Some(other) => Err(format!("{key}={other}: expected 1 or 0")),
    }
}

/// Checks one option's value where flashlab depends on it.
fn check_value(o: &Opt) -> Result<(), String> {
    let v = o.value.as_deref();
    let percentage = matches!(o.key.as_str(), "size" | "offset" | "io_size" | "io_limit")
        && v.is_some_and(|s| s.ends_with('%'));
    if !percentage {
        super::grammar::check(&o.key, v)?;
    }
    match o.key.as_str() {
        "direct" if !parse_bool("direct", v)? => Err(
            "direct=0 (buffered I/O) is not supported: flashlab has no page cache, every request reaches the drive as with direct=1".into(),
        ),
        "buffered" if parse_bool("buffered", v)? => Err(
            "buffered=1 is not supported: flashlab has no page cache, every request reaches the drive as with direct=1".into(),
        ),
        "filename" if v.is_some_and(|f| f.replace("\\:", "").contains(':')) => Err(format!(
            "filename={}: several files are not supported; each job addresses the simulated drive as one raw device",
            v.unwrap_or_default()
        )),
        "size" | "offset" | "io_size" | "io_limit" if percentage => {
            Err(format!(
                "{}={}: percentages are not supported (fio's null engine has no file to take them of); give bytes, e.g. 1g",
                o.key,
                v.unwrap_or_default()
            ))
        }
        "thread" | "group_reporting" | "norandommap" => parse_bool(&o.key, v).map(|_| ()),
        _ => Ok(()),
    }
}

/// Reads and checks the job file at `path`.
pub(crate) fn read(path: &Path) -> Result<JobFile> {
    let origin = path.display().to_string();
    let meta = std::fs::metadata(path)
        .map_err(|e| anyhow::anyhow!("{origin}: cannot read the job file: {e}"))?;
    if !meta.is_file() {
        bail!("{origin}: not a regular file");
    }
    if meta.len() > MAX_JOB_FILE_BYTES {
        bail!(
            "{origin}: {} bytes; a job file is at most {MAX_JOB_FILE_BYTES} bytes",
            meta.len()
        );
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("{origin}: cannot read the job file: {e}"))?;
    parse(&origin, &text)
}

/// Parses and checks a job file's text; errors name `origin` and the line.
pub(crate) fn parse(origin: &str, text: &str) -> Result<JobFile> {
    let mut global: Vec<Opt> = Vec::new();
    let mut all_global: Vec<Opt> = Vec::new();
    // The section being read: None before the first, Some(None) for [global].
    let mut section: Option<Option<Job>> = None;
    let mut jobs: Vec<Job> = Vec::new();
    let finish = |job: Option<Job>, jobs: &mut Vec<Job>| -> Result<(), String> {
        let Some(mut j) = job else { return Ok(()) };
        let get = |key: &str| j.options.iter().rev().find(|o| o.key == key);
        if let Some(o) = get("name") {
            j.name = o.value.clone().unwrap_or_default();
        }
        // An option's error names the line it came from (a global's, or the job's).
        let at = |o: &Opt, e: String| format!("{}: job {}: {e}", o.line_no, j.name);
        j.iodepth = match get("iodepth") {
            Some(o) => parse_count(
                "iodepth",
                o.value.as_deref(),
                trace::replay::MAX_QUEUE_DEPTH,
            )
            .map_err(|e| at(o, e))?,
            None => 1,
        };
        j.numjobs = match get("numjobs") {
            Some(o) => {
                parse_count("numjobs", o.value.as_deref(), MAX_JOBS).map_err(|e| at(o, e))?
            }
            None => 1,
        };
        // Names and file names are free text without whitespace (grammar::text), which
        // fio's I/O log, whose fields are separated by spaces, can carry.
        j.has_size = get("size").is_some();
        if let (false, Some(o)) = (j.has_size, get("offset")) {
            return Err(at(
                o,
                "offset without size: give size too (on a raw device fio would take the device's size less the offset; flashlab gives a job without size the whole drive)".into(),
            ));
        }
        if let Some(o) = get("randrepeat") {
            let repeatable = parse_bool("randrepeat", o.value.as_deref()).map_err(|e| at(o, e))?;
            if !repeatable && get("randseed").is_none() {
                return Err(at(
                    o,
                    "randrepeat=0 asks fio for a different random sequence every run, and flashlab's runs are deterministic: give randseed=N to pick another sequence".into(),
                ));
            }
        }
        jobs.push(j);
        Ok(())
    };
    // A UTF-8 byte order mark (editors on Windows write one) is not part of the first line.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let at = |msg: String| anyhow::anyhow!("{origin}:{line_no}: {msg}");
        let line = raw.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let Some(name) = rest.strip_suffix(']') else {
                return Err(at(format!("{line:?}: a section header is [name]")));
            };
            let name = name.trim();
            if name.is_empty() {
                return Err(at("an empty section name".into()));
            }
            super::grammar::job_name("the section name", name).map_err(at)?;
            finish(section.take().flatten(), &mut jobs)
                .map_err(|m| anyhow::anyhow!("{origin}:{m}"))?;
            // fio takes every section whose name starts with "global" as global.
            section = Some((!name.starts_with("global")).then(|| Job {
                name: name.to_string(),
                options: global.clone(),
                own: Vec::new(),
                iodepth: 1,
                numjobs: 1,
                has_size: false,
            }));
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim().to_string())),
            None => (line, None),
        };
        if key == "include" || key.starts_with("include ") {
            return Err(at(unsupported("include")));
        }
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(at(format!("{line:?} is not an option (key or key=value)")));
        }
        if !HONOURED.contains(&key) && !ACCEPTED.contains(&key) {
            return Err(at(unsupported(key)));
        }
        let opt = Opt {
            key: key.to_string(),
            value,
            line_no,
        };
        check_value(&opt).map_err(at)?;
        match &mut section {
            None => {
                return Err(at(format!(
                    "option `{key}` outside of a section: put it under [global] or a [job]"
                )))
            }
            Some(None) => {
                global.push(opt.clone());
                all_global.push(opt);
            }
            Some(Some(job)) => {
                job.options.push(opt.clone());
                job.own.push(opt);
            }
        }
    }
    finish(section.take().flatten(), &mut jobs).map_err(|m| anyhow::anyhow!("{origin}:{m}"))?;
    if jobs.is_empty() {
        bail!("{origin}: no job sections (only [global] or nothing): nothing to run");
    }
    let total: u64 = jobs.iter().map(|j| j.numjobs as u64).sum();
    if total > MAX_JOBS as u64 {
        bail!("{origin}: {total} jobs with numjobs' clones; at most {MAX_JOBS}");
    }
    let group_reporting = jobs.iter().any(|j| {
        j.options
            .iter()
            .rev()
            .find(|o| o.key == "group_reporting")
            .is_some_and(|o| parse_bool("group_reporting", o.value.as_deref()) == Ok(true))
    });
    Ok(JobFile {
        jobs,
        global: all_global,
        group_reporting,
    })
}

/// One job fio runs: a job of the file, or one of its numjobs clones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Instance {
    /// Index into [`JobFile::jobs`].
    pub(crate) job: usize,
    /// Where fio writes its I/O log.
    pub(crate) iolog: PathBuf,
}

/// The job file for fio: every job and clone as a section of its own (each needs its own
/// iolog: fio's clones would share one and interleave it), in fio's order (a job, then
/// its clones), so each gets the random seeds fio gives it. The null engine writes the
/// log, at iodepth 1: at higher depths it reports requests busy and fio logs their retry
/// a second time; the job's iodepth applies in the replay. The jobs run as threads (the
/// I/O is the same; one process to stop). A job without size covers `drive_bytes`.
///
/// fio seeds its zipf, pareto and normal distributions from the file's name, so each
/// job keeps its `filename` (the null engine never opens it) or gets the name fio would
/// give it, `JOB.CLONE.0` (relative to fio's working directory, `dir`): a name that
/// changed from run to run would change the I/O. `directory` is dropped (fio checks that
/// it exists); with it, fio's own run would see `DIR/JOB.CLONE.0` and draw other offsets.
pub(crate) fn fio_job_text(
    file: &JobFile,
    dir: &Path,
    drive_bytes: u64,
) -> (String, Vec<Instance>) {
    let mut text =
        String::from("; written by flashlab fio: fio's null engine writes the I/O log\n");
    let mut instances = Vec::new();
    for (j, job) in file.jobs.iter().enumerate() {
        let own_file = job.options.iter().any(|o| o.key == "filename");
        for clone in 0..job.numjobs {
            let k = instances.len();
            // fio runs in `dir`: the log's name is relative, so no path of this machine's
            // (which could hold anything) is written into the job file.
            let iolog_name = format!("job{k}.iolog");
            let iolog = dir.join(&iolog_name);
            // The section is flashlab's own name: the job's may be anything fio reads
            // otherwise (a name starting with "global" is a global section to fio).
            let _ = writeln!(text, "\n[j{k}]");
            for o in job
                .options
                .iter()
                .filter(|o| !REPLACED.contains(&o.key.as_str()))
            {
                let _ = writeln!(text, "{}", o.line());
            }
            if !job.has_size {
                let _ = writeln!(text, "size={drive_bytes}");
            }
            let _ = writeln!(text, "ioengine=null");
            let _ = writeln!(text, "iodepth=1");
            let _ = writeln!(text, "numjobs=1");
            // Threads of one process: stopping fio stops every job.
            let _ = writeln!(text, "thread");
            if !own_file {
                let _ = writeln!(text, "filename={}.{clone}.0", job.name);
            }
            let _ = writeln!(text, "write_iolog={iolog_name}");
            instances.push(Instance { job: j, iolog });
        }
    }
    // fio reads job lines through an 8 KiB buffer and reads what passes it as another
    // option; every value's grammar keeps lines far shorter.
    for line in text.lines() {
        assert!(
            line.len() < MAX_FIO_LINE_BYTES,
            "a line for fio of {} bytes: {}...",
            line.len(),
            &line[..line.len().min(80)]
        );
    }
    (text, instances)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse("j.fio", text).unwrap_err().to_string()
    }

    #[test]
    fn globals_apply_to_the_jobs_after_them_and_jobs_override_them() {
        let f = parse(
            "j.fio",
            "; comment\n[global]\nbs=4k\nsize=1m\n\n[a]\nrw=randwrite\niodepth=32\nnumjobs=2\n\
             [global]\nbs=8k\n[b]\nname=bee\nbs=16k\nrw=read\nnorandommap\n",
        )
        .unwrap();
        assert_eq!(f.jobs.len(), 2);
        let a = &f.jobs[0];
        assert_eq!((a.name.as_str(), a.iodepth, a.numjobs), ("a", 32, 2));
        let keys = |j: &Job| j.options.iter().map(Opt::line).collect::<Vec<_>>();
        assert_eq!(
            keys(a),
            [
                "bs=4k",
                "size=1m",
                "rw=randwrite",
                "iodepth=32",
                "numjobs=2"
            ]
        );
        let b = &f.jobs[1];
        assert_eq!((b.name.as_str(), b.iodepth, b.numjobs), ("bee", 1, 1));
        assert_eq!(
            keys(b),
            [
                "bs=4k",
                "size=1m",
                "bs=8k",
                "name=bee",
                "bs=16k",
                "rw=read",
                "norandommap"
            ]
        );
        assert_eq!(b.own.len(), 4);
        assert!(a.has_size && b.has_size && !f.group_reporting);
        assert_eq!(f.global.len(), 3);
    }

    #[test]
    fn unsupported_options_are_refused_by_name_with_a_reason() {
        let e = err("[a]\nrw=write\nsize=1m\nverify=crc32c\n");
        assert!(
            e.starts_with("j.fio:4: option `verify` is not supported by flashlab fio")
                && e.contains("keeps no data"),
            "{e}"
        );
        let e = err("[global]\ntime_based\n[a]\nsize=1m\n");
        assert!(
            e.contains("j.fio:2: option `time_based`") && e.contains("number_ios"),
            "{e}"
        );
        // An option without a reason of its own lists what is honoured.
        let e = err("[a]\nsize=1m\nhugepage-size=2m\n");
        assert!(
            e.contains("`hugepage-size`") && e.contains("it honours rw, readwrite, bs"),
            "{e}"
        );
        assert!(err("[a]\nsize=1m\ninclude other.fio\n").contains("`include`"));
        assert!(err("[my job]\nsize=1m\n").contains("holds whitespace"));
        assert!(err("[a]\nsize=1m\nfilename=/tmp/has space\n").contains("holds whitespace"));
        assert!(
            err("[my job]\nsize=1m\nfilename=/dev/x\n").starts_with("j.fio:1: the section name")
        );
    }

    #[test]
    fn values_flashlab_depends_on_are_checked() {
        assert!(err("[a]\nsize=1m\ndirect=0\n").contains("no page cache"));
        assert!(err("[a]\nsize=1m\nbuffered\n").contains("no page cache"));
        assert!(parse("j.fio", "[a]\nsize=1m\ndirect=1\nioengine=libaio\n").is_ok());
        assert!(err("[a]\nsize=50%\n").contains("percentages"));
        assert!(err("[a]\nsize=1m\nfilename=/dev/a:/dev/b\n").contains("several files"));
        assert!(parse("j.fio", "[a]\nsize=1m\nfilename=/dev/disk/by-id/x\\:y\n").is_ok());
        assert!(err("[a]\nsize=1m\niodepth=0\n").contains("iodepth=0: expected a whole number"));
        assert!(err("[a]\nsize=1m\nnumjobs=5000\n").contains("from 1 to 256"));
        assert!(err("[a]\noffset=1m\n").contains("offset without size"));
        assert!(err("[a]\nsize=1m\nrandrepeat=0\n").contains("randseed"));
        assert!(parse("j.fio", "[a]\nsize=1m\nrandrepeat=0\nrandseed=7\n").is_ok());
    }

    #[test]
    fn malformed_files_are_clear_errors() {
        assert!(err("bs=4k\n[a]\n").contains("j.fio:1: option `bs` outside of a section"));
        assert!(err("[a\nbs=4k\n").contains("j.fio:1:"));
        assert!(err("[global]\nbs=4k\n").contains("no job sections"));
        assert!(err("").contains("no job sections"));
        assert!(err("[a]\nsize 1m\n").contains("not an option"));
        let many = "[a]\nsize=1m\nnumjobs=200\n[b]\nsize=1m\nnumjobs=200\n";
        assert!(err(many).contains("400 jobs") && err(many).contains("at most 256"));
    }

    #[test]
    fn fio_gets_a_section_per_clone_with_its_own_iolog_and_the_null_engine() {
        let f = parse(
            "j.fio",
            "[global]\nioengine=libaio\ndirect=1\n[a]\nrw=randwrite\niodepth=8\nnumjobs=2\nsize=1m\n\
             [b]\nrw=read\ngroup_reporting\nfilename=/dev/sdb\nname=bee\n",
        )
        .unwrap();
        assert!(f.group_reporting);
        let (text, inst) = fio_job_text(&f, Path::new("/t"), 4096);
        assert_eq!(
            inst.iter().map(|i| i.job).collect::<Vec<_>>(),
            [0, 0, 1],
            "a, its clone, then b"
        );
        assert_eq!(inst[2].iolog, Path::new("/t/job2.iolog"));
        // fio runs in /t: the logs' names are relative, the sections flashlab's own.
        let sections: Vec<&str> = text.split("\n\n").skip(1).map(str::trim).collect();
        assert_eq!(sections.len(), 3, "{text}");
        assert_eq!(
            sections[1],
            "[j1]\nrw=randwrite\nsize=1m\nioengine=null\niodepth=1\nnumjobs=1\nthread\nfilename=a.1.0\nwrite_iolog=job1.iolog"
        );
        assert_eq!(
            sections[2],
            "[j2]\nrw=read\nfilename=/dev/sdb\nsize=4096\nioengine=null\niodepth=1\nnumjobs=1\nthread\nwrite_iolog=job2.iolog"
        );
        assert!(!text.contains("libaio") && !text.contains("direct"));
    }

    #[test]
    fn sections_fio_takes_as_global_are_global_and_a_bom_is_not_an_option() {
        let f = parse(
            "j.fio",
            "\u{feff}[globalx]\nbs=8k\n[a]\nsize=1m\n[global2]\nrw=write\n[b]\nsize=2m\n",
        )
        .unwrap();
        let names: Vec<&str> = f.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(f.global.len(), 2);
        assert_eq!(f.jobs[1].options.len(), 3, "bs=8k, rw=write, size=2m");
        let e = err("\u{feff}bs=4k\n");
        assert!(e.starts_with("j.fio:1: option `bs` outside"), "{e}");
    }

    #[test]
    fn errors_found_at_a_section_end_name_the_option_line() {
        let e = err("[global]\niodepth=0\n[a]\nsize=1m\n");
        assert!(e.starts_with("j.fio:2: job a: iodepth=0"), "{e}");
        let e = err("[a]\nsize=1m\n\nnumjobs=999\n");
        assert!(e.starts_with("j.fio:4: job a: numjobs=999"), "{e}");
        let e = err("[a]\noffset=4k\n");
        assert!(e.starts_with("j.fio:2: job a: offset without size"), "{e}");
    }

    #[test]
    fn padded_values_never_reach_fio_and_every_line_for_fio_is_short() {
        let pad = " ".repeat(10_000);
        for payload in [
            format!("[a]\nsize=1m\nbs=4k\nrw=write{pad}exec_prerun=touch /tmp/PWNED\n"),
            format!("[a]\nsize=1m\nrw=write{pad}write_bw_log=/tmp/bw\n"),
            format!("[a]\nsize=1m\nfilename=a{pad}[evil]\n"),
            format!("[a]\nsize=1m\ndescription=x{pad}ioengine=psync\n"),
            format!("[a{pad}b]\nsize=1m\n"),
        ] {
            let e = err(&payload);
            assert!(e.starts_with("j.fio:"), "{e}");
            assert!(e.len() < 600, "the error shows a bounded part: {}", e.len());
        }
        // The longest values taken still make lines under 4 KiB.
        let split = vec!["4k/1"; 200].join(":");
        let long_name = "n".repeat(255);
        let f = parse(
            "j.fio",
            &format!(
                "[{long_name}]\nsize=1m\nbssplit={split}\nfilename=/{}\n",
                "f".repeat(254)
            ),
        )
        .unwrap();
        let (text, _) = fio_job_text(&f, Path::new("/t"), 4096);
        assert!(text.lines().all(|l| l.len() < MAX_FIO_LINE_BYTES));
        assert!(text.contains("\n[j0]\n"));
    }
}
