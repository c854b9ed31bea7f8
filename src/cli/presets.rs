//! `flashlab presets`: the device presets.

use super::*;

pub(crate) fn run() -> Result<()> {
    for (name, _) in flash::preset::BUILTIN {
        let p = Preset::load(name)?;
        let kind = match &p.device {
            flash::DeviceConfig::Ssd(c) => format!(
                "SSD {} GB, op {:.1}%, {} dies, {} KiB pages, {} pages/block, {} GC{}{}",
                c.geometry.logical_bytes / 1_000_000_000,
                c.geometry.op * 100.0,
                c.geometry.dies(),
                c.geometry.page_size_bytes / 1024,
                c.geometry.pages_per_block,
                c.gc.policy,
                c.mapping_cache.as_ref().map_or(String::new(), |m| format!(
                    ", mapping cache {} MiB in {}",
                    m.cache_bytes >> 20,
                    m.location
                )),
                c.endurance.as_ref().map_or(String::new(), |e| format!(
                    ", rated {} P/E{}",
                    e.rated_pe_cycles,
                    e.rated_tbw_bytes.map_or(String::new(), |b| format!(
                        " and {} TBW",
                        b / 1_000_000_000_000
                    ))
                ))
            ),
            flash::DeviceConfig::Hdd(c) => format!(
                "HDD {} GB, {} rpm, {:.1} ms average seek",
                c.logical_bytes / 1_000_000_000,
                c.rpm,
                c.average_seek_ns as f64 / 1e6
            ),
        };
        println!("{name:<8} {}\n         {kind}", p.description);
    }
    Ok(())
}
