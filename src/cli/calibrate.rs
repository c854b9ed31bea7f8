//! `flashlab calibrate`: probe a new file, a block device or a simulated drive, fit the SSD
//! model to it and write the preset.

use super::*;
use crate::calibrate::fit::{self, Basis, Fitted};
use crate::calibrate::os_target::OsTarget;
use crate::calibrate::probe::{self, MIN_REGION_BYTES, UNIT_BYTES};
use crate::calibrate::render::{self, Provenance};
use crate::calibrate::sim_target::SimTarget;
use crate::calibrate::target::ProbeTarget;
use clap::ArgGroup;
use flash::SsdConfig;

const DEFAULT_SIM_CAPACITY: u64 = 4 << 30;
const DEFAULT_SIM_SIZE: u64 = 1 << 30;
/// The preset written is built at this capacity (or its own, if smaller) as a check.
const CHECK_CAPACITY_BYTES: u64 = 16 << 30;

#[derive(clap::Args)]
#[command(
    group(ArgGroup::new("target").required(true).args(["file", "device", "sim_preset"])),
    after_help = "The probes, in order: flushes of the idle drive; 256 writes of 4 KiB, each followed \
by a flush; sequential 1 MiB writes at queue depth 8 over --size (the rate, and where it drops); \
reads of 4 KiB up to a superpage; random 4 KiB reads at queue depth 1 and 32; sequential 1 MiB \
reads; random 4 KiB writes at queue depth 1 and 32; a burst of 64 KiB writes at queue depth 32; \
reads of data just written; discards of 4 KiB to 256 MiB (the sizes that fit), each after an idle \
pause; 8 small discards back to back; one discard while reads run; on a device or a simulated drive, \
reads of discarded data of 4 KiB to 64 KiB (the link's rate, no flash behind them). Every value \
of the preset says which probe measured it, that it is only a bound, or that it is assumed. On a \
file, a discard is a punched hole: the file system's work, not the drive's TRIM. See \
docs/commands/calibrate.md."
)]
pub(crate) struct CalibrateArgs {
    /// Probe a new file at PATH on a disk's file system (O_DIRECT): created, used and
    /// removed, also on an error or Ctrl-C; a PATH that exists is refused.
    #[arg(long, value_name = "PATH")]
    pub(crate) file: Option<PathBuf>,
    /// Probe a whole block device, ERASING its first --size bytes (needs
    /// --i-understand-this-erases); refused while it or a partition of it is mounted, used
    /// as swap or held by another driver.
    #[arg(long, value_name = "DEV", requires = "i_understand_this_erases")]
    pub(crate) device: Option<PathBuf>,
    /// Confirms that --device may be overwritten and discarded.
    #[arg(long)]
    pub(crate) i_understand_this_erases: bool,
    /// Probe a simulated drive (a preset name or TOML file) in virtual time and print what
    /// calibrate recovered beside the preset's own values.
    #[arg(long, value_name = "PRESET")]
    pub(crate) sim_preset: Option<String>,
    /// --sim-preset: the simulated drive's capacity [default: 4GiB].
    #[arg(long, value_parser = units::parse_size, requires = "sim_preset")]
    pub(crate) capacity: Option<u64>,
    /// Bytes probed from the start of the file or device, at least 64MiB: the sequential
    /// write stops here, and nothing beyond is touched [--sim-preset default: 1GiB].
    #[arg(long, value_parser = units::parse_size)]
    pub(crate) size: Option<u64>,
    /// Where to write the preset (TOML); `flashlab sim --preset PRESET.toml` loads it.
    #[arg(long, value_name = "PRESET.toml")]
    pub(crate) out: Option<PathBuf>,
    /// Replace --out if it exists (a regular file only; never through a symlink).
    #[arg(long)]
    pub(crate) replace: bool,
    /// The preset's name [default: the --out file's name without .toml].
    #[arg(long)]
    pub(crate) name: Option<String>,
    /// Seed of the probe's random offsets.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
}

pub(crate) fn run(a: CalibrateArgs) -> Result<()> {
    let started = Instant::now();
    if a.sim_preset.is_none() && super::given::given("capacity") {
        bail!("--capacity sizes the simulated drive of --sim-preset; a file or device has its own");
    }
    if a.out.is_none() && a.name.is_some() {
        bail!("--name names the preset written to --out: add --out PRESET.toml");
    }
    if let Some(out) = &a.out {
        if out.extension().and_then(|e| e.to_str()) != Some("toml") {
            bail!(
                "--out {}: a preset file's name ends in .toml (that is how --preset tells a file from a built-in name)",
                out.display()
            );
        }
        if a.file.as_ref().is_some_and(|f| f == out) {
            bail!("--out and --file are the same path; the probe file is removed afterwards");
        }
        // Found out before the probe, not after it.
        crate::outfile::check("--out", out, a.replace)?;
    } else if a.replace {
        bail!("--replace has no effect without --out");
    }
    let needs = |what: &str| {
        anyhow::anyhow!("{what} needs --size SIZE (at least 64MiB) and --out PRESET.toml")
    };
    let cancel = crate::signals::cancel_token();
    let (mut target, truth): (Box<dyn ProbeTarget>, Option<Preset>) = if let Some(path) = &a.file {
        let (Some(size), Some(_)) = (a.size, &a.out) else {
            return Err(needs("--file"));
        };
        check_size(size)?;
        (Box::new(OsTarget::create_file(path, size, cancel)?), None)
    } else if let Some(dev) = &a.device {
        let (Some(size), Some(_)) = (a.size, &a.out) else {
            return Err(needs("--device"));
        };
        check_size(size)?;
        (Box::new(OsTarget::open_device(dev, size, cancel)?), None)
    } else {
        let name = a.sim_preset.as_deref().expect("clap requires one target");
        let p = Preset::load(name)?.with_capacity(a.capacity.unwrap_or(DEFAULT_SIM_CAPACITY));
        match p.ssd_config() {
            None => bail!(
                "--sim-preset {name} is a hard disk: calibrate fits flashlab's SSD model (dies, programs, an SLC cache), which a disk has none of"
            ),
            Some(c) if c.zoned.is_some() => bail!(
                "--sim-preset {name} is a zoned drive: calibrate's probes write anywhere, which a zoned drive refuses (use a conventional preset)"
            ),
            Some(_) => {}
        }
        let size = a
            .size
            .unwrap_or(DEFAULT_SIM_SIZE.min(p.logical_bytes() / 4));
        check_size(size)?;
        (Box::new(SimTarget::new(&p, size)?), Some(p))
    };
    println!(
        "flashlab calibrate: {} ({} MiB probed of {} bytes), seed {}",
        target.describe(),
        target.region_bytes() >> 20,
        target.capacity_bytes(),
        a.seed
    );
    let m = probe::run(target.as_mut(), a.seed, &mut |step| {
        eprintln!("flashlab calibrate: {step}")
    })?;
    // The probe file goes now, before anything else can fail.
    drop(target);
    let f = fit::fit(&m);
    println!("  measured (not fitted)");
    for (what, value) in &f.observations {
        println!("    {what:<28} {value}");
    }
    print_fit(&f, truth.as_ref());
    let name = match (&a.name, &a.out) {
        (Some(n), _) => n.clone(),
        (None, Some(out)) => out
            .file_stem()
            .map_or("calibrated".into(), |s| s.to_string_lossy().into_owned()),
        (None, None) => "calibrated".into(),
    };
    let who = Provenance {
        date: crate::calibrate::today(),
        what: m.target.clone(),
    };
    let description = format!(
        "calibrated by flashlab calibrate on {} from {}",
        who.date, m.target
    );
    let text = render::preset_toml(&f, &name, &description, &who);
    // What is written must load as a preset and say what the fit says.
    let loaded = Preset::from_toml(&name, &text)
        .context("calibrate's own preset does not load (a bug; nothing written)")?;
    if loaded != f.preset(&name, &description) {
        bail!("calibrate's preset text says other than its fit (a bug; nothing written)");
    }
    // Scaled down, a drive with many dies or large superpages may have too few blocks per
    // die for its spare space: say so rather than leave it to the first `sim`.
    let check_bytes = loaded.logical_bytes().min(CHECK_CAPACITY_BYTES);
    if let Err(e) = loaded.clone().with_capacity(check_bytes).build() {
        println!(
            "  note: the preset does not build at {} MiB ({e}); simulate it at a larger --capacity",
            check_bytes >> 20
        );
    }
    if let Some(out) = &a.out {
        crate::outfile::write("--out", out, &text, a.replace)?;
        println!(
            "  wrote {} (try: flashlab sim --preset {} --capacity 1GiB --workload uniform --writes 1x)",
            out.display(),
            out.display()
        );
    }
    println!("  wall time {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

fn check_size(size: u64) -> Result<()> {
    if size < MIN_REGION_BYTES {
        bail!("--size {size}: calibrate needs at least 64MiB to probe");
    }
    if !size.is_multiple_of(1 << 20) {
        bail!("--size {size}: give a whole number of MiB");
    }
    Ok(())
}

fn basis_word(b: &Basis) -> &'static str {
    match b {
        Basis::Measured(_) => "measured",
        Basis::Bound(..) => "bound",
        Basis::Tied(..) => "tied",
        Basis::Assumed(_) => "assumed",
    }
}

/// (parameter, fitted value, basis) for every fitted parameter, and the true value where a
/// simulated drive's preset gives it.
fn rows(f: &Fitted, truth: Option<&SsdConfig>) -> Vec<(String, String, Option<String>, String)> {
    let mut r = Vec::new();
    let mut row = |name: &str, value: String, t: Option<String>, b: &Basis| {
        r.push((name.to_string(), value, t, basis_word(b).to_string()));
    };
    let t = truth;
    row(
        "command_overhead_ns",
        f.command_overhead_ns.value.to_string(),
        t.map(|c| c.timing.command_overhead_ns.to_string()),
        &f.command_overhead_ns.basis,
    );
    row(
        "host_bytes_per_s",
        f.host_bytes_per_s.value.to_string(),
        t.map(|c| c.timing.host_bytes_per_s.to_string()),
        &f.host_bytes_per_s.basis,
    );
    row(
        "channel_bytes_per_s",
        f.channel_bytes_per_s.value.to_string(),
        t.map(|c| c.timing.channel_bytes_per_s.to_string()),
        &f.channel_bytes_per_s.basis,
    );
    row(
        "read_ns",
        f.read_ns.value.to_string(),
        t.map(|c| c.timing.read_ns.to_string()),
        &f.read_ns.basis,
    );
    row(
        "superpage_bytes",
        f.superpage_bytes.value.to_string(),
        t.map(|c| c.geometry.superpage_bytes().to_string()),
        &f.superpage_bytes.basis,
    );
    row(
        "dies",
        f.dies.value.to_string(),
        t.map(|c| c.geometry.dies().to_string()),
        &f.dies.basis,
    );
    row(
        "channels",
        f.channels.value.to_string(),
        t.map(|c| c.geometry.channels.to_string()),
        &f.channels.basis,
    );
    row(
        "program_ns",
        f.program_ns.value.to_string(),
        t.map(|c| c.timing.program_ns.to_string()),
        &f.program_ns.basis,
    );
    match &f.slc {
        Ok(s) => {
            row(
                "slc program_ns",
                s.program_ns.value.to_string(),
                t.map(|c| {
                    c.slc_cache
                        .as_ref()
                        .map_or("none".into(), |s| s.program_ns.to_string())
                }),
                &s.program_ns.basis,
            );
            row(
                "slc max_fraction",
                s.max_fraction.value.to_string(),
                t.map(|c| {
                    c.slc_cache
                        .as_ref()
                        .map_or("none".into(), |s| s.max_fraction.to_string())
                }),
                &s.max_fraction.basis,
            );
        }
        Err(b) => row(
            "slc cache",
            "none".into(),
            t.map(|c| {
                c.slc_cache.as_ref().map_or("none".into(), |s| {
                    format!("max_fraction {}", s.max_fraction)
                })
            }),
            b,
        ),
    }
    row(
        "write_cache_bytes",
        f.write_cache_bytes.value.to_string(),
        t.map(|c| c.write_cache_bytes.to_string()),
        &f.write_cache_bytes.basis,
    );
    row(
        "write_ack_ns",
        f.write_ack_ns.value.to_string(),
        t.map(|c| c.timing.write_ack_ns.to_string()),
        &f.write_ack_ns.basis,
    );
    row(
        "trim queued",
        f.trim_queued.value.to_string(),
        t.map(|c| c.trim.queued.to_string()),
        &f.trim_queued.basis,
    );
    row(
        "trim command_overhead_ns",
        f.trim_command_overhead_ns.value.to_string(),
        t.map(|c| (c.trim.command_overhead_ns + c.trim.per_range_ns).to_string()),
        &f.trim_command_overhead_ns.basis,
    );
    // Per 4 KiB (the fitted preset's mapping unit): a drive mapping larger units pays its
    // per-unit cost once for several of the probes' units.
    row(
        "trim per_page_ns",
        f.trim_per_page_ns.value.to_string(),
        t.map(|c| {
            let per_4k = c.trim.per_page_ns as f64 * UNIT_BYTES as f64
                / c.geometry.mapping_unit_bytes as f64;
            if per_4k.fract() == 0.0 {
                format!("{per_4k:.0}")
            } else {
                format!("{per_4k:.2}")
            }
        }),
        &f.trim_per_page_ns.basis,
    );
    r
}

fn print_fit(f: &Fitted, truth: Option<&Preset>) {
    let t = truth.and_then(|p| p.ssd_config());
    println!("  fitted (the preset also holds assumed values; its comments say which)");
    if t.is_some() {
        println!(
            "    {:<26} {:>14} {:>14}  basis",
            "parameter", "recovered", "true"
        );
    }
    for (name, value, truth, basis) in rows(f, t) {
        match truth {
            Some(tv) => println!("    {name:<26} {value:>14} {tv:>14}  {basis}"),
            None => println!("    {name:<26} {value:>14}  {basis}"),
        }
    }
    if truth.is_some() && t.is_none() {
        println!("    (the simulated drive is a disk: it has no SSD parameters to compare)");
    }
}
