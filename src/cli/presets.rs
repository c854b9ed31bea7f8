//! `flashlab presets`: the device presets, a line each, or one preset whole.

use super::*;

#[derive(clap::Args)]
pub(crate) struct PresetsArgs {
    /// One preset, whole: its TOML (a built-in name or a preset file's path), or with
    /// --json every setting as the simulator reads it.
    pub(crate) name: Option<String>,
    /// Print JSON: a list of {name, description, summary, config} (config: every
    /// setting), or the one preset's.
    #[arg(long)]
    pub(crate) json: bool,
}

/// A preset as JSON: its name, description, the one-line summary `presets` prints, and
/// every setting.
fn preset_json(p: &Preset) -> Result<serde_json::Value> {
    Ok(serde_json::json!({
        "name": p.name,
        "description": p.description,
        "summary": summary(p),
        "config": serde_json::to_value(p)?,
    }))
}

pub(crate) fn run(a: PresetsArgs) -> Result<()> {
    if let Some(name) = &a.name {
        let p = Preset::load(name)?;
        if a.json {
            return super::emit::json_pretty(&preset_json(&p)?);
        }
        let text = match flash::preset::BUILTIN.iter().find(|(n, _)| n == name) {
            Some((_, text)) => text.to_string(),
            None => std::fs::read_to_string(name)
                .with_context(|| format!("preset file {name}: cannot read it"))?,
        };
        print!("{text}");
        return Ok(());
    }
    if a.json {
        let all = flash::preset::BUILTIN
            .iter()
            .map(|(name, _)| preset_json(&Preset::load(name)?))
            .collect::<Result<Vec<_>>>()?;
        return super::emit::json_pretty(&serde_json::Value::Array(all));
    }
    for (name, _) in flash::preset::BUILTIN {
        let p = Preset::load(name)?;
        println!("{name:<8} {}\n         {}", p.description, summary(&p));
    }
    Ok(())
}

/// A preset's kind and main settings on one line.
fn summary(p: &Preset) -> String {
    match &p.device {
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
    }
}
