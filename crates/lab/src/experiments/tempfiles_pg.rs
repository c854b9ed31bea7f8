//! Experiment `tempfiles-pg` (paper 000 on the real PostgreSQL): the server itself
//! (Debian's package, [`pgserver`]) runs paper 000's hash join `orders ⋈ lineitem` with its
//! temporary tablespace on ext4 on a loop device, mounted with and without `discard`, the
//! device's writeback limited as a 1 GiB host's (paper 000's machine: its bdi's dirty
//! limit, [`trace::dirty_limit`]), each query one repetition of a capture (`flashlab
//! capture`'s runs); the captured block I/O is replayed on the simulated MX500, 840 Pro and
//! Cosmos+, per repetition: time, WAF, TRIM commands.
//!
//! The server runs in a cluster of its own (`initdb` into the section's work directory,
//! a Unix socket only), as the `postgres` user, with paper 000's settings: shared_buffers
//! 128 MB, work_mem 64 kB at quick scale and the paper's 4 MB above it, PostgreSQL 12's
//! hash-table limits (`hash_mem_multiplier = 1`), one process per query (no parallel
//! workers), hash joins only. The tables hold TPC-H's order keys and prices with a pad that
//! makes each row the `tempfiles` experiment's 128 bytes, and the query carries the pads
//! through the join, so the batch files hold 128-byte rows as the model's do.
//!
//! fallocate: the paper patched PostgreSQL to preallocate its temp files; this section runs
//! the server as Debian ships it, so the two fallocate combinations stay the model's
//! (`tempfiles`).
//!
//! The host-path checks simulate the same join on the loop device's own speed: a preset
//! `flashlab calibrate` fits to it before the model runs ([`calibrate_loop`]), with the
//! capture's writeback: the trigger of a device's own dirty limits and the flusher's pace
//! measured from the capture ([`busiest_writeback_pages`]).
//!
//! Needs root, loop devices, tracefs and the server; without them the section says it was
//! skipped and why.

use super::Scale;
use crate::report::{BarPlot, Plot, Provenance, Role, Section, Verdict, HEADLINE_TOLERANCE};
use crate::rows::{Cell, Row};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use trace::capture::{self, CaptureSpec, FsKind};

const ID: &str = "tempfiles-pg";
const TITLE: &str =
    "The real PostgreSQL's hash-join temp files on ext4, captured and replayed (paper 000)";
const NEEDS: &str = "This experiment runs Debian's PostgreSQL server (package postgresql) as the postgres user with its temporary tablespace on ext4 on a loop device, captures the block I/O and needs root, loop devices, tracefs and the server.";

/// The drives the captures are replayed on (paper 000's three).
const DRIVES: [&str; 3] = ["mx500", "840pro", "cosmos"];

/// The memory of paper 000's host, whose writeback the loop device is given.
const HOST_RAM_BYTES: u64 = 1 << 30;

/// The bytes `flashlab calibrate` probes of the loop device ([`calibrate_loop`]).
const CALIBRATE_BYTES: u64 = 256 << 20;

/// Bytes of a row's pad: key (8) and price (8) and a `char(111)` pad (1 byte of length,
/// 111 of spaces) make the 128 bytes of `tempfiles`' rows.
const PAD_CHARS: usize = 111;

/// The section's sizes.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct Sizes {
    sf: f64,
    repeat: u32,
    work_mem_kib: u64,
    fs_bytes: u64,
}

fn sizes(scale: Scale) -> Sizes {
    match scale {
        Scale::Quick => Sizes {
            sf: 1.0,
            repeat: 3,
            work_mem_kib: 64,
            fs_bytes: 2 << 30,
        },
        Scale::Full => Sizes {
            sf: 0.5,
            repeat: 10,
            work_mem_kib: 4096,
            fs_bytes: 4 << 30,
        },
        // The paper's 30 repetitions; its 40 GB database is SF 30, which this section
        // does not reach (the tables are loaded over a psql pipe).
        Scale::Paper => Sizes {
            sf: 1.0,
            repeat: 30,
            work_mem_kib: 4096,
            fs_bytes: 8 << 30,
        },
    }
}

use super::RepReplay as Rep;

/// One capture (discard on or off) with its replays.
#[derive(Debug, Clone, serde::Serialize)]
struct Run {
    discard: bool,
    /// The server's own wall time per query (psql's, this machine).
    real_s: Vec<f64>,
    /// Per repetition: the requests ext4 sent.
    writes: Vec<u64>,
    write_bytes: Vec<u64>,
    discards: Vec<u64>,
    discard_bytes: Vec<u64>,
    /// Per repetition: the files ext4 unlinked (`ext4_unlink_enter`; empty on a kernel
    /// without the event).
    unlinks: Vec<u64>,
    /// Per repetition: the extents ext4 freed, a block group's piece each
    /// (`ext4_mballoc_free`; empty on a kernel without the event).
    freed_extents: Vec<u64>,
    /// The journal's commits as points among the run's deletes: before each closed its
    /// transaction, how many files had been unlinked since the capture began
    /// ([`capture::commits_after_unlinks`]; empty without the events or without deletes).
    /// The model commits at the same points.
    commits_after_unlinks: Vec<u64>,
    /// The capture's loop device reported itself rotational (`queue/rotational`; a loop
    /// device takes its backing disk's): the model's ext4 allocates as on such a device.
    rotational: bool,
    /// The most pages the kernel wrote back in any 100 ms of the capture (its write
    /// requests by issue time): the real writeback path's pace, which the model's flusher
    /// keeps ([`busiest_writeback_pages`], [`vfs::HostConfig::flusher_ns_per_page`]).
    writeback_pages_per_100ms: u64,
    /// Per drive: its repetitions.
    replayed: Vec<(String, Vec<Rep>)>,
    /// The temporary files the server logged deleting (`log_temp_files = 0`) over all
    /// repetitions, and their bytes.
    temp_files: u64,
    temp_bytes: u64,
    /// The same join simulated (`join --algorithm postgres --host linux --host-ram 1GiB`,
    /// this kernel's online discard) on the loop device's calibrated preset
    /// ([`calibrate_loop`]), per repetition: bytes written, TRIM
    /// commands and bytes; and its temporary files per repetition and their bytes.
    model_write_bytes: Vec<u64>,
    model_trims: Vec<u64>,
    model_trim_bytes: Vec<u64>,
    /// ... and the extents its deletes freed, per repetition.
    model_freed_extents: Vec<u64>,
    model_temp_files: u64,
    model_temp_bytes: u64,
}

impl Run {
    /// Mean per repetition of `v`.
    fn mean(v: &[u64]) -> f64 {
        v.iter().sum::<u64>() as f64 / v.len().max(1) as f64
    }
}

impl Run {
    fn reps(&self, drive: &str) -> &[Rep] {
        self.replayed
            .iter()
            .find(|(d, _)| d == drive)
            .map_or(&[], |(_, r)| r.as_slice())
    }

    /// Mean simulated seconds per repetition on `drive`.
    fn mean_s(&self, drive: &str) -> f64 {
        let r = self.reps(drive);
        r.iter().map(|r| r.time_s).sum::<f64>() / r.len().max(1) as f64
    }
}

pub fn run(scale: Scale, seed: u64, ctx: &super::RunCtx) -> Result<Section, crate::LabError> {
    let started = std::time::Instant::now();
    let found = capture::check_support(FsKind::Ext4)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            let install = pgserver::find_install().map_err(|e| e.to_string())?;
            let user = pgserver::os_user("postgres").map_err(|e| e.to_string())?;
            Ok((install, user))
        });
    let (install, user) = match found {
        Ok(v) => v,
        Err(e) => return Ok(Section::skipped(ID, TITLE, &e, NEEDS, seed)),
    };
    let s = sizes(scale);
    let work = super::work_dir("flashlab-tempfiles-pg-")?;
    let (images, images_at) = super::capture_dir("flashlab-tempfiles-pg-", s.fs_bytes)?;
    let result = measure(s, ctx, &install, &user, work.path(), images.path());
    drop(images);
    drop(work);
    let (runs, loop_preset) = result?;
    Ok(Section {
        id: ID.into(),
        title: TITLE.into(),
        question: question(s, install.major, &images_at),
        seed,
        runtime_s: started.elapsed().as_secs_f64(),
        plots: plots(&runs),
        tables: vec![crate::report::Table::of(
            "tempfiles_pg",
            format!(
                "SF {}, work_mem {} kB, {} repetitions of the real server's join on a {} MiB ext4 written back as a 1 GiB host's; each repetition's requests, and its replay on each drive",
                s.sf, s.work_mem_kib, s.repeat, s.fs_bytes >> 20
            ),
            rows(&runs),
        )],
        verdicts: analyse(&runs),
        provenance: provenance(),
        results: json!({"sizes": s, "postgresql": install.major, "images": images_at, "runs": runs, "loop_preset": loop_preset}),
    })
}

/// Makes the cluster, loads the tables, captures both mounts and replays them.
fn measure(
    s: Sizes,
    ctx: &super::RunCtx,
    install: &pgserver::Install,
    user: &pgserver::OsUser,
    work: &Path,
    images: &Path,
) -> Result<(Vec<Run>, String), crate::LabError> {
    // The server runs as postgres: it must pass through the work and image directories
    // (0711: never list or change them).
    for d in [work, images] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o711))
            .map_err(|e| crate::LabError::io(d, e))?;
    }
    let cluster = pgserver::Cluster::init(install, user, work).map_err(|e| e.to_string())?;
    let mut server = cluster.start(&settings(s)).map_err(|e| e.to_string())?;
    load(&server, s.sf, &ctx.cancel)?;
    // The temporary tablespace: a symlink the captured command points at its mount.
    let link = work.join("tblspc");
    let first = work.join("tblspc-setup");
    std::fs::create_dir(&first).map_err(|e| crate::LabError::io(&first, e))?;
    std::os::unix::fs::chown(&first, Some(user.uid), Some(user.gid))
        .map_err(|e| crate::LabError::io(&first, e))?;
    std::os::unix::fs::symlink(&first, &link).map_err(|e| crate::LabError::io(&link, e))?;
    server
        .sql(&format!(
            "CREATE TABLESPACE flashtmp LOCATION '{}'",
            link.display()
        ))
        .map_err(|e| e.to_string())?;
    let version_dir = std::fs::read_dir(&first)
        .map_err(|e| crate::LabError::io(&first, e))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| is_version_dir(n))
        .ok_or("CREATE TABLESPACE made no version directory (PG_<major>_<catalog version>)")?;
    let mut runs = Vec::new();
    for discard in [false, true] {
        let command = query_command(&server, user, &link, &version_dir, s);
        let spec = CaptureSpec {
            fs: FsKind::Ext4,
            size_bytes: s.fs_bytes,
            discard,
            mkfs_opts: vec![],
            mount_opts: vec![],
            command,
            work_dir: images.to_path_buf(),
            stdout: Some(work.join(format!("query-{discard}.txt"))),
            out: None,
            cancel: ctx.cancel.clone(),
            runs: s.repeat,
            cpu: None,
            think_on_cpu: false,
            realtime: false,
            dirty_limit_bytes: Some(trace::dirty_limit::host_dirty_bytes(HOST_RAM_BYTES)),
            others_traverse: true,
        };
        let log_from = std::fs::metadata(cluster.log_path()).map_or(0, |m| m.len());
        let c = ctx.capture_step(|| {
            capture::capture(&spec).map_err(|e| format!("discard {discard}: {e}").into())
        })?;
        if c.exit_code != Some(0) {
            let said = std::fs::read_to_string(work.join(format!("query-{discard}.txt")))
                .unwrap_or_default();
            return Err(format!(
                "the query failed (discard {discard}, exit {:?}): {said}",
                c.exit_code
            )
            .into());
        }
        let out =
            std::fs::read_to_string(work.join(format!("query-{discard}.txt"))).unwrap_or_default();
        let mut run = split(discard, &c, &out, s.fs_bytes, ctx)?;
        (run.temp_files, run.temp_bytes) = temp_files_logged(&cluster.log_path(), log_from);
        runs.push(run);
    }
    server.stop().map_err(|e| e.to_string())?;
    let device = calibrate_loop(s, ctx, work, images)?;
    let device_toml =
        std::fs::read_to_string(&device).map_err(|e| crate::LabError::io(Path::new(&device), e))?;
    let schedules: Vec<(bool, Vec<u64>, bool, u64)> = runs
        .iter()
        .map(|r| {
            let flusher_ns_per_page = flusher_ns_per_page(r.writeback_pages_per_100ms);
            (
                r.discard,
                r.commits_after_unlinks.clone(),
                r.rotational,
                flusher_ns_per_page,
            )
        })
        .collect();
    let modelled = ctx.map(&schedules, |(discard, commits, rotational, flusher)| {
        model_run(s, *discard, commits, &device, *rotational, *flusher)
    })?;
    for (run, m) in runs.iter_mut().zip(modelled) {
        run.model_write_bytes = m.repetitions.iter().map(|r| r.host_write_bytes).collect();
        run.model_trims = m.repetitions.iter().map(|r| r.trim_commands).collect();
        run.model_trim_bytes = m.repetitions.iter().map(|r| r.trim_bytes).collect();
        run.model_freed_extents = m.repetitions.iter().map(|r| r.freed_extents).collect();
        (run.model_temp_files, run.model_temp_bytes) = (m.spill_files, m.bytes_spilled);
    }
    Ok((runs, device_toml))
}

/// The captures' kind of device, measured: `flashlab calibrate` probes a file on ext4 on a
/// loop device made as the captures' are (a new one, its image where theirs was, the same
/// size and dirty limit; O_DIRECT, so what it times is the loop device, a file in this
/// machine's memory or page cache, and ext4's own work on O_DIRECT writes, which the model
/// then simulates again), and the preset it fits goes to `work/loop.toml`. It is a timing
/// measurement: it holds a job slot (one core of its own), but other sections may run on
/// the rest, so the preset moves with the machine's load and with where the image went;
/// the section keeps it in its results (`loop_preset`) so the model side can be run again
/// on it. The host-path checks simulate the join on it: the
/// kernel's writeback batches end after 100 ms of submitting, so how many files a batch
/// reaches, and how many pieces each file is written in, depends on the device's speed
/// (the SF 1 join frees 251-314 extents a repetition on the SATA presets and 601-620 on
/// the NVMe ones: docs/sources.md). Its path.
fn calibrate_loop(
    s: Sizes,
    ctx: &super::RunCtx,
    work: &Path,
    images: &Path,
) -> Result<String, crate::LabError> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the flashlab binary: {e}"))?;
    let preset = work.join("loop.toml");
    let said = work.join("calibrate.txt");
    let command: Vec<String> = [
        exe.display().to_string(),
        "calibrate".into(),
        "--file".into(),
        "{}/probe.bin".into(),
        "--size".into(),
        format!("{}MiB", CALIBRATE_BYTES >> 20),
        "--out".into(),
        preset.display().to_string(),
        "--name".into(),
        "loop".into(),
    ]
    .into();
    let spec = CaptureSpec {
        fs: FsKind::Ext4,
        size_bytes: s.fs_bytes,
        discard: false,
        mkfs_opts: vec![],
        mount_opts: vec![],
        command,
        work_dir: images.to_path_buf(),
        stdout: Some(said.clone()),
        out: None,
        cancel: ctx.cancel.clone(),
        runs: 1,
        cpu: None,
        think_on_cpu: false,
        realtime: false,
        dirty_limit_bytes: Some(trace::dirty_limit::host_dirty_bytes(HOST_RAM_BYTES)),
        others_traverse: false,
    };
    let c = ctx.step(|| {
        capture::capture(&spec).map_err(|e| format!("calibrate the loop device: {e}").into())
    })?;
    if c.exit_code != Some(0) {
        return Err(format!(
            "flashlab calibrate on the loop device failed (exit {:?}; its messages are above, on standard error): {}",
            c.exit_code,
            std::fs::read_to_string(&said).unwrap_or_default()
        )
        .into());
    }
    Ok(preset.display().to_string())
}

/// The same join simulated: PostgreSQL 12's hash join of the same tables and work_mem on
/// simfs over `device` (the loop device's calibrated preset, [`calibrate_loop`]), behind
/// Linux's page cache and writeback as a 1 GiB host's, with this kernel's online discard
/// (Linux 6.17's rules; this machine runs a later one).
/// ext4's journal commits where the real run's did among its deletes (`commits`, after
/// that many unlinks: ext4 commits every 5 s of wall-clock time, so which deletes a commit
/// takes varies from run to run, and the model follows the run it is compared with), or,
/// without the capture's unlink events, every 5 s of the model's time; and at each
/// repetition's end (the capture's sync). ext4's allocator scans as on the capture's
/// loop device (`rotational`). The writeback is the capture's: the device's own dirty
/// limits (`strict_limit`), and the flusher at the real one's measured pace
/// (`flusher_ns_per_page`, [`busiest_writeback_pages`]).
fn model_run(
    s: Sizes,
    discard: bool,
    commits: &[u64],
    device: &str,
    rotational: bool,
    flusher_ns_per_page: u64,
) -> Result<crate::joinrun::JoinRunResult, crate::LabError> {
    let mut spec = super::tempfiles::join_spec(device, s.sf, s.fs_bytes, s.repeat, false, discard)?;
    spec.join.algorithm = hashjoin::Algorithm::Postgres;
    spec.memory_bytes = s.work_mem_kib << 10;
    let host = vfs::HostConfig {
        journal_commit_after_unlinks: commits.to_vec(),
        // The captures limit the loop device's own dirty pages (`capture --host-ram`).
        strict_limit: true,
        flusher_ns_per_page,
        ..vfs::HostConfig::linux(HOST_RAM_BYTES)
    };
    super::tempfiles::set_host(&mut spec, host, discard);
    spec.storage.kernel = simfs::DiscardKernel::Linux6_17;
    spec.storage.rotational = rotational;
    spec.storage.commit_each_repetition = true;
    crate::joinrun::run(&spec, &mut |_| {})
}

/// The window the real flusher's pace is measured over: its batches' length
/// ([`vfs::sim::WRITEBACK_BATCH_NS`], `HZ / 10`).
const WRITEBACK_WINDOW_NS: u64 = vfs::sim::WRITEBACK_BATCH_NS;

/// The most pages `t`'s write requests carried in any `window_ns` of their issue times (a
/// window sliding from request to request): the fastest the kernel wrote back during the
/// capture. On this machine's loop devices the writeback path (the flusher's work, the
/// loop worker's copying) is slower than the device the calibration fits to O_DIRECT
/// writes, and its pace decides how many dirty files one 100 ms batch reaches.
fn busiest_writeback_pages(t: &trace::Trace, window_ns: u64) -> u64 {
    let writes: Vec<(u64, u64)> = t
        .requests
        .iter()
        .filter(|r| r.cmd.op == flash::Op::Write)
        .map(|r| (r.at_ns, r.cmd.len_bytes.div_ceil(4096)))
        .collect();
    let (mut most, mut in_window, mut first) = (0, 0, 0);
    for &(at, pages) in &writes {
        in_window += pages;
        while writes[first].0 + window_ns <= at {
            in_window -= writes[first].1;
            first += 1;
        }
        most = most.max(in_window);
    }
    most
}

/// The model flusher's time per page at the real one's pace: a batch's 100 ms over the
/// most pages written back in any 100 ms (0, no bound, for a capture with no writes).
fn flusher_ns_per_page(pages_per_window: u64) -> u64 {
    match pages_per_window {
        0 => 0,
        p => WRITEBACK_WINDOW_NS / p,
    }
}

/// The temporary files the server's log reports deleting after byte `from` of it
/// (`LOG:  temporary file: path "...", size N`), and their bytes.
fn temp_files_logged(log: &Path, from: u64) -> (u64, u64) {
    let text = std::fs::read(log).unwrap_or_default();
    let text = String::from_utf8_lossy(text.get(from as usize..).unwrap_or_default());
    text.lines()
        .filter(|l| l.contains("temporary file:"))
        .filter_map(|l| l.rsplit("size ").next()?.trim().parse::<u64>().ok())
        .fold((0, 0), |(n, b), size| (n + 1, b + size))
}

/// The server's settings: paper 000's (shared_buffers 128 MB, work_mem), PostgreSQL 12's
/// hash limits, one process per query, hash joins only, and nothing in the background.
fn settings(s: Sizes) -> Vec<(&'static str, String)> {
    vec![
        ("shared_buffers", "128MB".into()),
        ("work_mem", format!("{}kB", s.work_mem_kib)),
        ("hash_mem_multiplier", "1".into()),
        ("max_parallel_workers_per_gather", "0".into()),
        ("enable_mergejoin", "off".into()),
        ("enable_nestloop", "off".into()),
        ("jit", "off".into()),
        ("autovacuum", "off".into()),
        // The data directory is scratch: its durability is not measured.
        ("fsync", "off".into()),
        ("synchronous_commit", "off".into()),
        ("full_page_writes", "off".into()),
        // Every temp file's size in the server's log, at its deletion.
        ("log_temp_files", "0".into()),
        // A query whose psql is gone (the capture interrupted) is cancelled, so its temp
        // files go and the file system can be unmounted.
        ("client_connection_check_interval", "100ms".into()),
    ]
}

/// Creates and loads `orders` and `lineitem` (key, price, pad) at `sf`.
fn load(server: &pgserver::Server, sf: f64, cancel: &trace::Cancel) -> Result<(), crate::LabError> {
    use workloads::tpch::{rows, Table};
    for (table, key, price) in [
        (Table::Orders, "o_orderkey", "o_totalprice"),
        (Table::Lineitem, "l_orderkey", "l_extendedprice"),
    ] {
        let name = table.name();
        let pad = &key[..1];
        server
            .sql(&format!(
                "CREATE TABLE {name} ({key} int8, {price} int8, {pad}_pad char({PAD_CHARS}))"
            ))
            .map_err(|e| e.to_string())?;
        server
            .copy_in(name, |w| {
                for (i, r) in rows(table, sf).enumerate() {
                    if i % 65_536 == 0 && cancel.is_cancelled() {
                        return Err(std::io::Error::other("interrupted"));
                    }
                    writeln!(w, "{},{},\"\"", r.key, r.price_cents)?;
                }
                Ok(())
            })
            .map_err(|e| e.to_string())?;
        server
            .sql(&format!("ANALYZE {name}"))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Whether `name` is a tablespace version directory, `PG_<major>_<catalog version>`: the
/// name goes into a command run as root, and the directory it was read from is the
/// server's user's, so nothing else is taken.
fn is_version_dir(name: &str) -> bool {
    let mut parts = name.split('_');
    parts.next() == Some("PG")
        && parts.clone().count() == 2
        && parts.all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The join, carrying both pads through it (so the batch files hold whole rows).
const QUERY: &str = "SELECT count(*), sum(o_totalprice + l_extendedprice), sum(octet_length(o_pad) + octet_length(l_pad)) FROM orders JOIN lineitem ON o_orderkey = l_orderkey";

/// The captured command: makes the tablespace's directory on the mount (the postgres
/// user's), points the tablespace's link at it and runs the query once, timed.
fn query_command(
    server: &pgserver::Server,
    user: &pgserver::OsUser,
    link: &Path,
    version_dir: &str,
    s: Sizes,
) -> Vec<String> {
    let psql: Vec<String> = server
        .psql_command()
        .iter()
        .map(|a| shell_quote(a))
        .collect();
    let script = format!(
        "set -e; d=\"$FLASHLAB_DIR/pgtmp\"; mkdir -p \"$d\"/{version_dir}; chown -R {uid}:{gid} \"$d\"; chmod 700 \"$d\"; ln -sfn \"$d\" {link}; \
         t0=$(date +%s%N); {psql} -c {sql}; t1=$(date +%s%N); echo \"real_ns $((t1 - t0))\"",
        version_dir = shell_quote(version_dir),
        uid = user.uid,
        gid = user.gid,
        link = shell_quote(&link.display().to_string()),
        psql = psql.join(" "),
        sql = shell_quote(&format!(
            "SET temp_tablespaces = flashtmp; SET work_mem = '{}kB'; {QUERY}",
            s.work_mem_kib
        )),
    );
    vec!["sh".into(), "-c".into(), script]
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// A capture's requests per repetition and its replays on every drive.
fn split(
    discard: bool,
    c: &capture::Captured,
    out: &str,
    fs_bytes: u64,
    ctx: &super::RunCtx,
) -> Result<Run, crate::LabError> {
    let t = &c.trace;
    let mut run = Run {
        discard,
        real_s: out
            .lines()
            .filter_map(|l| l.strip_prefix("real_ns "))
            .filter_map(|v| v.trim().parse::<f64>().ok())
            .map(|ns| ns / 1e9)
            .collect(),
        writes: vec![],
        write_bytes: vec![],
        discards: vec![],
        discard_bytes: vec![],
        unlinks: vec![],
        freed_extents: vec![],
        rotational: c.rotational.unwrap_or(false),
        writeback_pages_per_100ms: busiest_writeback_pages(t, WRITEBACK_WINDOW_NS),
        // Without the events, or with no deletes to place the commits among, the model
        // commits on its own 5-s timer.
        commits_after_unlinks: match &c.unlinks {
            Some(u) if !u.unlink_at_ns.is_empty() => {
                capture::commits_after_unlinks(&u.commit_locked_at_ns, &u.unlink_at_ns)
            }
            _ => vec![],
        },
        replayed: vec![],
        temp_files: 0,
        temp_bytes: 0,
        model_write_bytes: vec![],
        model_trims: vec![],
        model_trim_bytes: vec![],
        model_freed_extents: vec![],
        model_temp_files: 0,
        model_temp_bytes: 0,
    };
    let mut from = 0;
    for &end in &c.run_ends_ns {
        let rep = || {
            t.requests
                .iter()
                .filter(|r| r.at_ns >= from && r.at_ns < end)
        };
        let of = |op: flash::Op| rep().filter(move |r| r.cmd.op == op);
        run.writes.push(of(flash::Op::Write).count() as u64);
        run.write_bytes
            .push(of(flash::Op::Write).map(|r| r.cmd.len_bytes).sum());
        run.discards.push(of(flash::Op::Trim).count() as u64);
        run.discard_bytes
            .push(of(flash::Op::Trim).map(|r| r.cmd.len_bytes).sum());
        // Kernel events of this repetition, by their times.
        let during = |times: &[u64]| times.iter().filter(|&&t| t >= from && t < end).count() as u64;
        if let Some(u) = &c.unlinks {
            run.unlinks.push(during(&u.unlink_at_ns));
        }
        if let Some(freed) = &c.freed_extent_at_ns {
            run.freed_extents.push(during(freed));
        }
        from = end;
    }
    let jobs: Vec<&str> = DRIVES.to_vec();
    let replayed = ctx.map(&jobs, |drive| {
        super::replay_repetitions(drive, fs_bytes, t, &c.run_ends_ns).map(|(reps, _)| reps)
    })?;
    run.replayed = DRIVES.iter().map(|d| d.to_string()).zip(replayed).collect();
    Ok(run)
}

/// A row of table `tempfiles_pg`: one repetition of one mount on one drive.
struct PgRow<'a> {
    run: &'a Run,
    drive: &'a str,
    rep: usize,
}

impl Row for PgRow<'_> {
    const COLUMNS: &'static [&'static str] = &[
        "discard",
        "repetition",
        "real query s (this machine)",
        "write requests",
        "MB written",
        "discards",
        "MB discarded",
        "drive",
        "replayed s",
        "replayed WAF",
    ];
    fn cells(&self) -> Vec<Cell> {
        let (r, i) = (self.run, self.rep);
        let rep = r.reps(self.drive).get(i);
        vec![
            Cell::text(if r.discard { "on" } else { "off" }),
            Cell::Count(i as u64 + 1),
            Cell::opt(r.real_s.get(i).copied(), 2),
            Cell::Count(r.writes[i]),
            Cell::Fixed(r.write_bytes[i] as f64 / 1e6, 1),
            Cell::Count(r.discards[i]),
            Cell::Fixed(r.discard_bytes[i] as f64 / 1e6, 1),
            Cell::text(self.drive),
            Cell::opt(rep.map(|r| r.time_s), 2),
            Cell::opt(rep.and_then(|r| r.waf), 2),
        ]
    }
}

fn rows(runs: &[Run]) -> Vec<PgRow<'_>> {
    runs.iter()
        .flat_map(|run| {
            DRIVES.iter().flat_map(move |drive| {
                (0..run.writes.len()).map(move |rep| PgRow { run, drive, rep })
            })
        })
        .collect()
}

fn plots(runs: &[Run]) -> Vec<Plot> {
    vec![BarPlot {
        file_stem: "tempfiles_pg".into(),
        title: "The real server's join replayed: mean seconds per repetition".into(),
        y_label: "simulated s".into(),
        categories: DRIVES.iter().map(|d| d.to_string()).collect(),
        series: runs
            .iter()
            .map(|r| {
                (
                    format!("discard {}", if r.discard { "on" } else { "off" }),
                    DRIVES.iter().map(|d| Some(r.mean_s(d))).collect(),
                )
            })
            .collect(),
    }
    .into()]
}

fn question(s: Sizes, major: u32, images_at: &str) -> String {
    format!(
        "Does the real PostgreSQL's join pay for TRIM on the drives paper 000 measured? PostgreSQL {major} \
         (Debian's package, as the postgres user, a cluster of its own) joins TPC-H SF {} orders and \
         lineitem (128-byte rows) with work_mem {} kB, shared_buffers 128 MB and PostgreSQL 12's hash \
         limits, its temporary tablespace on a {} MiB ext4 on a loop device (its image {images_at}) \
         written back as a 1 GiB host's (the device's dirty limit 20% of 1 GiB), {} times with the \
         discard mount and {} times without; the block I/O of each is captured and replayed on the \
         MX500, the 840 Pro and the Cosmos+ (closed loop per issuing task). fallocate is not \
         measured here: the paper patched the server for it, and Debian's server is run as shipped \
         (the `tempfiles` section models it). The host-path checks simulate the same join with ext4's \
         journal committing where each real run's did among its file deletes (jbd2's commits against \
         ext4's unlinks in the capture): ext4 commits every 5 s of wall-clock time, so which deletes a \
         commit takes, and so how many discards it sends, varies from run to run, and the model follows \
         the run it is compared with, on a loop device's speed (a preset `flashlab calibrate` fits, \
         in this run, to a loop device made as the captures' are: a wall-clock measurement of this \
         machine, which moves with its load; kept in the results as `loop_preset`), with the \
         writeback the capture had: background writeback started where a writer under the \
         device's own dirty limits starts it (halfway between the background and the hard \
         limit), and the flusher at the pace the capture measured (the most pages it wrote \
         back in any 100 ms), which bounds how many files a 100 ms batch reaches however fast \
         the calibrated device is.",
        s.sf,
        s.work_mem_kib,
        s.fs_bytes >> 20,
        s.repeat,
        s.repeat
    )
}

fn provenance() -> Vec<Provenance> {
    vec![
        Provenance {
            number: "write and discard requests".into(),
            role: "measured: the real server's temp files on this machine's kernel (ext4, online discard), the loop device's writeback limited by its bdi (strict_limit, min_bytes = max_bytes = 20% of 1 GiB, Linux's default dirty_ratio)".into(),
        },
        Provenance {
            number: "the host-path checks' drive".into(),
            role: "measured: a preset `flashlab calibrate` fitted to a loop device made as the captures' are (a file on ext4 on it, O_DIRECT, 256 MiB probed; a wall-clock measurement that moves with the machine's load), in this section's results as `loop_preset`; the model's writeback batches meet a device of the capture's kind".into(),
        },
        Provenance {
            number: "the host-path checks' writeback pace".into(),
            role: "measured: per capture, the most pages the real kernel wrote back in any 100 ms (its write requests by issue time; `writeback_pages_per_100ms` in the results), given to the model's flusher as its time per page; with the writeback trigger of a bdi under strict_limit (mm/page-writeback.c, balance_dirty_pages: the free-run ceiling) it is what keeps the model's freed extents and discards independent of the calibrated device's speed (docs/sources.md)".into(),
        },
        Provenance {
            number: "replayed times and WAF".into(),
            role: "predicted by the presets' models (the TRIM cost by the rule in docs/sources.md); think times are this machine's".into(),
        },
    ]
}

/// The host path's model checks: the simulated join's requests against the real server's
/// per repetition (ours = model / real; 1 = the same), within ±30%.
fn host_path_checks(runs: &[Run]) -> Vec<Verdict> {
    let mut v = Vec::new();
    for r in runs {
        let mount = if r.discard { "discard" } else { "nodiscard" };
        let no_reps: (&[u64], &[u64]) = (&[], &[]);
        let mut measures = vec![
            (
                "temp-files",
                "temporary files",
                r.temp_files as f64 / r.writes.len().max(1) as f64,
                r.model_temp_files as f64,
                no_reps,
            ),
            (
                "write-bytes",
                "bytes written",
                Run::mean(&r.write_bytes),
                Run::mean(&r.model_write_bytes),
                (&r.write_bytes, &r.model_write_bytes),
            ),
        ];
        if !r.freed_extents.is_empty() {
            // ext4's frees, before any merging: how many pieces the files were in.
            measures.push((
                "freed-extents",
                "extents freed by deletes (a block group's piece each)",
                Run::mean(&r.freed_extents),
                Run::mean(&r.model_freed_extents),
                (&r.freed_extents, &r.model_freed_extents),
            ));
        }
        if r.discard {
            measures.push((
                "discards",
                "discard commands",
                Run::mean(&r.discards),
                Run::mean(&r.model_trims),
                (&r.discards, &r.model_trims),
            ));
            measures.push((
                "discard-bytes",
                "bytes discarded",
                Run::mean(&r.discard_bytes),
                Run::mean(&r.model_trim_bytes),
                (&r.discard_bytes, &r.model_trim_bytes),
            ));
        }
        let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
        for (id, what, real, model, (real_reps, model_reps)) in measures {
            let each = if id == "temp-files" && !r.unlinks.is_empty() {
                // The commit schedule counts unlinks: they must be the model's deletes.
                format!(
                    "; files ext4 unlinked each repetition: {}",
                    list(&r.unlinks)
                )
            } else if real_reps.is_empty() {
                String::new()
            } else {
                format!(
                    "; each repetition: real {}, model {}",
                    list(real_reps),
                    list(model_reps)
                )
            };
            let ratio = model / real.max(1.0);
            let claim = format!(
                "The simulated host path gives the real server's {what} per repetition ({} mount), within ±30%",
                if r.discard { "discard" } else { "no-discard" }
            );
            let journal = if r.commits_after_unlinks.is_empty() {
                "the journal committing every 5 s of the model's time: the capture has no unlink events"
            } else {
                "the journal committing where the real run's did among its deletes"
            };
            let reference = format!("the real PostgreSQL on ext4 on this machine's kernel, written back as a 1 GiB host's; ours = `join --algorithm postgres --host linux --host-ram 1GiB` on the loop device's calibrated preset (Linux 6.17's online discard; {journal}) / real") + &format!("; the device's own dirty limits, and the flusher at the capture's pace: {} pages in its busiest 100 ms", r.writeback_pages_per_100ms);
            v.push(
                Verdict::numeric(
                    &format!("tempfiles-pg.host-path-{id}-{mount}"),
                    &claim,
                    &reference,
                    ratio,
                    1.0,
                    HEADLINE_TOLERANCE,
                    format!("per repetition: real {real:.0}, model {model:.0} ({ratio:.2}×){each}"),
                )
                .with_role(Role::Check),
            );
        }
    }
    v
}

/// The verdicts of the two captures.
fn analyse(runs: &[Run]) -> Vec<Verdict> {
    let get = |d: bool| {
        runs.iter()
            .find(|r| r.discard == d)
            .expect("both mounts ran")
    };
    let (off, on) = (get(false), get(true));
    let sum = |v: &[u64]| v.iter().sum::<u64>();
    let penalty = |drive: &str| on.mean_s(drive) / off.mean_s(drive).max(1e-12);
    let (mx, pro) = (penalty("mx500"), penalty("840pro"));
    let cosmos_waf = on
        .reps("cosmos")
        .iter()
        .filter_map(|r| r.waf)
        .fold(0.0f64, f64::max);
    vec![
        Verdict::ordering(
            "tempfiles-pg.discard-mount-only",
            "Only the discard mount makes ext4 send TRIMs for the server's deleted temp files (a check of the capture)",
            "paper 000: TRIM on vs off",
            sum(&off.discards) as f64,
            sum(&off.discards) == 0 && sum(&on.discards) > 0,
            format!(
                "discards without the mount option: {}; with it: {} ({:.1} MB); the server logged {} and {} temporary files ({:.1} and {:.1} MB)",
                sum(&off.discards),
                sum(&on.discards),
                sum(&on.discard_bytes) as f64 / 1e6,
                off.temp_files,
                on.temp_files,
                off.temp_bytes as f64 / 1e6,
                on.temp_bytes as f64 / 1e6
            ),
        )
        .with_role(Role::Check),
        Verdict::numeric(
            "tempfiles-pg.mx500-trim-penalty",
            "MX500: the real server's join with TRIM takes ~2.7× as long as without",
            "paper 000: join phase 120 s → ~320 s with TRIM, no fallocate",
            mx,
            2.7,
            0.3,
            format!(
                "mean per repetition on the MX500: {:.2} s with discard, {:.2} s without ({mx:.2}×); the whole query, both phases",
                on.mean_s("mx500"),
                off.mean_s("mx500")
            ),
        )
        .if_missed(format!(
            "this machine's kernel, not the paper's: since Linux 6.8 ext4's online discard trims from each \
             freed extent to the end of the free run it lies in (docs/sources.md, \"ext4's online discard\"), \
             so {:.0} GB were discarded per repetition for {:.1} GB of temporary files, where paper 000's \
             CentOS 7 kernel (3.10) discarded exactly the freed extents; the TRIM cost per command and per \
             byte is an assumption by the rule in docs/sources.md (the `tempfiles` section's sensitivity \
             table shows how it moves), and the paper's penalty is its join phase's at 40 GB, ours the whole \
             query",
            sum(&on.discard_bytes) as f64 / on.discards.len().max(1) as f64 / 1e9,
            on.temp_bytes as f64 / on.discards.len().max(1) as f64 / 1e9,
        )),
        Verdict::ordering(
            "tempfiles-pg.840pro-smaller-penalty",
            "840 Pro: the same shape, a smaller TRIM penalty than the MX500's",
            "paper 000: Fig. 8",
            pro,
            pro > 1.0 && pro < mx,
            format!("TRIM penalty: 840 Pro {pro:.2}×, MX500 {mx:.2}×"),
        )
        .if_missed(
            "the two presets' TRIM costs follow one rule for SATA drives (docs/sources.md): what differs \
             between them is their flash and buffers, not their TRIM",
        ),
        Verdict::numeric(
            "tempfiles-pg.cosmos-waf-one",
            "Cosmos+: with TRIM the WAF stays ~1.0",
            "paper 000: Cosmos+ WAF 1.0 with TRIM",
            cosmos_waf,
            1.0,
            0.1,
            format!("highest WAF of a repetition with discard: {cosmos_waf:.3}"),
        )
        .if_missed(
            "the Cosmos+ preset's 16 KiB mapping unit: ext4's discards that cover part of a unit leave it \
             valid (the `trim` section's Cosmos+ runs with a 4 KiB unit give 1.000)",
        ),
    ]
    .into_iter()
    .chain(host_path_checks(runs))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busiest_window_of_writeback_slides_from_request_to_request() {
        let w = |at_ns: u64, pages: u64| trace::Request {
            stream: 0,
            cmd: flash::Command::write(0, pages * 4096),
            think_ns: 0,
            at_ns,
            after: None,
        };
        let t = trace::Trace {
            requests: vec![w(0, 10), w(60, 20), w(120, 30), w(250, 5)],
            timestamped: true,
        };
        // 60-159 holds 50 pages; no 100 ns holds more (0-99: 30; 120-219: 30).
        assert_eq!(busiest_writeback_pages(&t, 100), 50);
        assert_eq!(busiest_writeback_pages(&t, 1_000), 65);
        assert_eq!(flusher_ns_per_page(0), 0);
        assert_eq!(flusher_ns_per_page(37_000), 2_702);
    }

    /// The model side of a stored run again, on its own loop preset and commit points:
    /// `FLASHLAB_PG_RESULTS=report/results.json cargo test --release -p lab
    /// model_side_again -- --ignored --nocapture` prints, per capture, the real and the
    /// model's freed extents and discards per repetition (for tracing a host-path gap
    /// without capturing again). `FLASHLAB_PG_PRESET_FROM=other/results.json` takes the
    /// loop preset of another run, `FLASHLAB_PG_PROGRAM_NS=N` sets its program time (the
    /// sweep in docs/sources.md, "Open files' windows").
    #[test]
    #[ignore = "needs FLASHLAB_PG_RESULTS: a report's results.json with a tempfiles-pg section"]
    fn model_side_again() {
        let path = std::env::var("FLASHLAB_PG_RESULTS").expect("FLASHLAB_PG_RESULTS");
        let all: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let section = &all["experiments"]["tempfiles-pg"];
        let r = &section["results"];
        // FLASHLAB_PG_PRESET_FROM: another results.json whose loop preset to use instead
        // (is a gap the device's speed or the run's commit points?).
        let preset_of = match std::env::var("FLASHLAB_PG_PRESET_FROM") {
            Ok(other) => {
                serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(other).unwrap())
                    .unwrap()["experiments"]["tempfiles-pg"]["results"]["loop_preset"]
                    .clone()
            }
            Err(_) => r["loop_preset"].clone(),
        };
        let mut preset_text = preset_of.as_str().unwrap().to_string();
        // FLASHLAB_PG_PROGRAM_NS: the preset's program time set to this (how the model
        // moves with the device's speed).
        if let Ok(ns) = std::env::var("FLASHLAB_PG_PROGRAM_NS") {
            preset_text = preset_text
                .lines()
                .map(|l| match l.trim_start().starts_with("program_ns") {
                    true => format!("program_ns = {ns}"),
                    false => l.to_string(),
                })
                .collect::<Vec<_>>()
                .join("\n");
        }
        // A directory of its own (a fixed name in /tmp could be a symlink planted there).
        let dir = tempfile::tempdir().unwrap();
        let preset = dir.path().join("loop.toml");
        std::fs::write(&preset, preset_text).unwrap();
        let z = &r["sizes"];
        let s = Sizes {
            sf: z["sf"].as_f64().unwrap(),
            repeat: z["repeat"].as_u64().unwrap() as u32,
            work_mem_kib: z["work_mem_kib"].as_u64().unwrap(),
            fs_bytes: z["fs_bytes"].as_u64().unwrap(),
        };
        let nums = |v: &serde_json::Value| -> Vec<u64> {
            v.as_array()
                .map(|a| a.iter().filter_map(|x| x.as_u64()).collect())
                .unwrap_or_default()
        };
        for run in r["runs"].as_array().unwrap() {
            let discard = run["discard"].as_bool().unwrap();
            let commits = nums(&run["commits_after_unlinks"]);
            let rotational = run["rotational"].as_bool().unwrap_or(false);
            // FLASHLAB_PG_FLUSHER_NS: the flusher's time per page (default: the run's own
            // measured pace; 0 for runs made before it was kept).
            let flusher = match std::env::var("FLASHLAB_PG_FLUSHER_NS") {
                Ok(ns) => ns.parse().unwrap(),
                Err(_) => {
                    flusher_ns_per_page(run["writeback_pages_per_100ms"].as_u64().unwrap_or(0))
                }
            };
            let m = model_run(
                s,
                discard,
                &commits,
                preset.to_str().unwrap(),
                rotational,
                flusher,
            )
            .unwrap();
            let freed: Vec<u64> = m.repetitions.iter().map(|r| r.freed_extents).collect();
            let trims: Vec<u64> = m.repetitions.iter().map(|r| r.trim_commands).collect();
            let mb = |v: Vec<u64>| v.iter().map(|b| b >> 20).collect::<Vec<_>>();
            let trim_mb = mb(m.repetitions.iter().map(|r| r.trim_bytes).collect());
            println!(
                "discard {discard}: freed extents real {:?} model {freed:?}; discards real {:?} model {trims:?}; MB discarded real {:?} model {trim_mb:?}",
                nums(&run["freed_extents"]),
                nums(&run["discards"]),
                mb(nums(&run["discard_bytes"]))
            );
        }
    }

    fn run(discard: bool, discards: u64, secs: [f64; 3], waf: f64) -> Run {
        let reps = |s: f64| {
            (0..2)
                .map(|_| Rep {
                    time_s: s,
                    waf: Some(waf),
                    trims: discards,
                })
                .collect::<Vec<_>>()
        };
        Run {
            discard,
            real_s: vec![1.0; 2],
            writes: vec![100; 2],
            write_bytes: vec![1 << 20; 2],
            discards: vec![discards; 2],
            discard_bytes: vec![discards << 20; 2],
            unlinks: vec![],
            freed_extents: vec![300; 2],
            rotational: false,
            writeback_pages_per_100ms: 30_000,
            commits_after_unlinks: vec![],
            replayed: DRIVES
                .iter()
                .zip(secs)
                .map(|(d, s)| (d.to_string(), reps(s)))
                .collect(),
            temp_files: 10,
            temp_bytes: 10 << 20,
            model_write_bytes: vec![1 << 20; 2],
            model_trims: vec![discards; 2],
            model_trim_bytes: vec![discards << 20; 2],
            model_freed_extents: vec![300; 2],
            model_temp_files: 5,
            model_temp_bytes: 5 << 20,
        }
    }

    #[test]
    fn the_papers_shape_holds_every_claim() {
        let runs = [
            run(false, 0, [10.0, 10.0, 10.0], 1.0),
            run(true, 50, [27.0, 15.0, 11.0], 1.0),
        ];
        let v = analyse(&runs);
        Verdict::all_hold_with_unique_ids(&v);
    }

    #[test]
    fn a_null_model_fails_every_prediction() {
        // TRIM costs nothing and does nothing: the same times, the Cosmos+'s WAF climbs.
        let runs = [
            run(false, 0, [10.0, 10.0, 10.0], 1.6),
            run(true, 50, [10.0, 10.0, 10.0], 1.6),
        ];
        Verdict::assert_no_prediction_holds(&analyse(&runs));
    }

    #[test]
    fn a_row_is_one_repetition_on_one_drive() {
        let runs = [run(false, 0, [1.0; 3], 1.0), run(true, 5, [2.0; 3], 1.0)];
        let r = rows(&runs);
        assert_eq!(r.len(), 2 * DRIVES.len() * 2);
        let cells = r[0].cells();
        assert_eq!(cells.len(), PgRow::COLUMNS.len());
        assert_eq!(cells[0], Cell::text("off"));
    }

    #[test]
    fn repetitions_served_by_new_processes_replay_one_after_another() {
        // Two repetitions of the same 200 writes, each by a process of its own (stream 1,
        // then 2), a second apart. Replayed as one closed loop, stream 2 would start with
        // the trace, beside stream 1; replayed by repetition, each takes the time of its
        // own writes on the drive, and the second starts after the first.
        let rep = |stream: u32, at0: u64| {
            (0..200u64).map(move |i| trace::Request {
                stream,
                cmd: flash::Command::write(i * 4096, 4096),
                think_ns: 0,
                at_ns: at0 + i * 1000,
                after: None,
            })
        };
        let t = trace::Trace {
            requests: rep(1, 0).chain(rep(2, 1_000_000_000)).collect(),
            timestamped: true,
        };
        let (reps, _) = crate::experiments::replay_repetitions(
            "mx500",
            1 << 30,
            &t,
            &[500_000_000, 2_000_000_000],
        )
        .unwrap();
        assert_eq!(reps.len(), 2);
        let (a, b) = (reps[0].time_s, reps[1].time_s);
        assert!(a > 0.0 && (b - a).abs() <= 0.05 * a, "{a} s then {b} s");
        assert_eq!(reps[0].trims + reps[1].trims, 0);
        // The whole trace in one closed loop: both streams at once, so no longer than the
        // two one after another.
        let both = crate::experiments::replay_captured("mx500", 1 << 30, &t).unwrap();
        assert!(
            (both.simulated_ns as f64 / 1e9) < a + b,
            "{} s for both at once",
            both.simulated_ns as f64 / 1e9
        );
    }

    #[test]
    fn a_stream_that_goes_on_from_one_repetition_to_the_next_is_not_paused_twice() {
        // One task (a writeback thread) writes 200 x 4 KiB in each of two repetitions a
        // second apart, think times derived as a capture derives them: its first request
        // of the second repetition carries the second's pause, which the replay passes
        // between the repetitions, so each takes the time of its own writes.
        let mut requests: Vec<trace::Request> = (0..2u64)
            .flat_map(|rep| {
                (0..200u64).map(move |i| trace::Request {
                    stream: 7,
                    cmd: flash::Command::write(i * 4096, 4096),
                    think_ns: 0,
                    at_ns: rep * 1_000_000_000 + i * 20_000,
                    after: None,
                })
            })
            .collect();
        let done: Vec<Option<u64>> = requests.iter().map(|r| Some(r.at_ns + 15_000)).collect();
        trace::request::derive_think_times(&mut requests, &done);
        assert!(requests[200].think_ns > 900_000_000);
        let t = trace::Trace {
            requests,
            timestamped: true,
        };
        let (reps, _) = crate::experiments::replay_repetitions(
            "840pro",
            1 << 30,
            &t,
            &[500_000_000, 1_500_000_000],
        )
        .unwrap();
        let (a, b) = (reps[0].time_s, reps[1].time_s);
        assert!(
            a > 0.0 && a < 0.1 && (b - a).abs() <= 0.1 * a,
            "{a} s then {b} s"
        );
    }

    #[test]
    fn the_command_quotes_what_it_is_given() {
        assert_eq!(shell_quote("a'b"), "'a'\\''b'");
        // The version directory is read from a directory the server's user owns: only
        // PG_<digits>_<digits> is taken.
        assert!(is_version_dir("PG_15_202209061"));
        for bad in [
            "PG_15",
            "PG_15_2022_1",
            "PG_$(id)_1",
            "PG_15_1 ",
            "pg_15_1",
            "PG__1",
        ] {
            assert!(!is_version_dir(bad), "{bad}");
        }
    }
}
