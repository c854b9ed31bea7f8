//! calibrate on simulated drives whose parameters it does not see: the probe sequence runs
//! in virtual time against presets changed from the built-in ones, and the fit must give
//! back their parameters within the stated tolerances.

use super::fit::{self, Fitted};
use super::probe;
use super::sim_target::SimTarget;
use flash::Preset;

fn calibrate(p: &Preset) -> (probe::Measurements, Fitted) {
    let mut t = SimTarget::new(p, 1 << 30).unwrap();
    let m = probe::run(&mut t, 1, &mut |_| {}).unwrap();
    let f = fit::fit(&m);
    (m, f)
}

fn hidden() -> Vec<(&'static str, Preset)> {
    let base = |n: &str| Preset::load(n).unwrap().with_capacity(4 << 30);
    let mut v = Vec::new();
    v.push(("mx500", base("mx500")));
    let mut p = base("mx500");
    p.ssd_config_mut().unwrap().slc_cache = None;
    v.push(("mx500 no slc", p));
    let mut p = base("mx500");
    p.ssd_config_mut().unwrap().geometry.chips_per_channel = 4;
    v.push(("mx500 16 dies", p));
    let mut p = base("mx500");
    p.ssd_config_mut().unwrap().geometry.page_size_bytes = 8192;
    v.push(("mx500 8k pages", p));
    let mut p = base("840pro");
    p.ssd_config_mut().unwrap().geometry.chips_per_channel = 2;
    p.ssd_config_mut().unwrap().write_cache_bytes = 8 << 20;
    p.ssd_config_mut().unwrap().timing.write_ack_ns = 20_000;
    v.push(("840pro 16 dies cache", p));
    v.push(("840pro", base("840pro")));
    v.push(("nvme", base("nvme")));
    v.push(("x25e", base("x25e")));
    v
}

#[test]
fn explore() {
    for (name, p) in hidden() {
        let (m, f) = calibrate(&p);
        eprintln!("== {name}");
        if name.contains("16 dies") {
            let c = &m.seq_write.completions_ns;
            let d: Vec<u64> = c.windows(2).map(|w| w[1] - w[0]).collect();
            eprintln!("seq gaps {:?} ... {:?}", &d[..40], &d[d.len() - 20..]);
        }
        let c = p.ssd_config().unwrap();
        eprintln!(
            "oh {} / {}",
            f.command_overhead_ns.value, c.timing.command_overhead_ns
        );
        eprintln!(
            "host {} / {}",
            f.host_bytes_per_s.value, c.timing.host_bytes_per_s
        );
        eprintln!(
            "ch {} / {} {:?}",
            f.channel_bytes_per_s.value, c.timing.channel_bytes_per_s, f.channel_bytes_per_s.basis
        );
        eprintln!("tR {} / {}", f.read_ns.value, c.timing.read_ns);
        eprintln!(
            "sp {} / {}",
            f.superpage_bytes.value,
            c.geometry.superpage_bytes()
        );
        eprintln!(
            "dies {} / {} {:?}",
            f.dies.value,
            c.geometry.dies(),
            f.dies.basis
        );
        eprintln!(
            "tP {} / {} {:?}",
            f.program_ns.value, c.timing.program_ns, f.program_ns.basis
        );
        match &f.slc {
            Ok(s) => eprintln!(
                "slc {} {} / {:?}",
                s.program_ns.value, s.max_fraction.value, c.slc_cache
            ),
            Err(b) => eprintln!("no slc {b:?} / {:?}", c.slc_cache),
        }
        eprintln!(
            "cache {} ack {} / {} {}  {:?}",
            f.write_cache_bytes.value,
            f.write_ack_ns.value,
            c.write_cache_bytes,
            c.timing.write_ack_ns,
            f.write_cache_bytes.basis
        );
        eprintln!(
            "trim {} {} {} / {} {} {}",
            f.trim_queued.value,
            f.trim_command_overhead_ns.value,
            f.trim_per_page_ns.value,
            c.trim.queued,
            c.trim.command_overhead_ns + c.trim.per_range_ns,
            c.trim.per_page_ns
        );
        for o in &f.observations {
            eprintln!("  {o:?}");
        }
    }
}
