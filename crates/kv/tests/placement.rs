//! Separation by age on a drive with placement: fresh nodes carry WRITE_LIFE_SHORT, the
//! cleaner's copies WRITE_LIFE_LONG, so an FDP drive under simfs's hint map puts them on
//! different handles; the database's contents are the same with placement or without.

use astree::segments::SimSegments;
use flash::Device;
use kv::{Db, KvConfig};

/// The database's entries, the host bytes the drive took on each handle, and the
/// segments the cleaner cleaned.
type Outcome = (Vec<(Vec<u8>, Vec<u8>)>, Vec<u64>, u64);

fn run(placement: bool) -> Outcome {
    let mut preset = flash::Preset::load("nvme").unwrap().with_capacity(4 << 30);
    preset.ssd_config_mut().unwrap().fdp = Some(Box::new(flash::FdpConfig::new(5)));
    let dev = preset.build().unwrap();
    let mut cfg = simfs::FsConfig::for_device(flash::Device::logical_bytes(&dev));
    cfg.alloc = simfs::AllocPolicy::LogStructured;
    cfg.placement = placement.then(|| simfs::HintPlacement::linux_streams(5));
    let fs = simfs::SimFs::mkfs(simfs::Timed::new(dev), cfg).unwrap();
    let segs = SimSegments::on(vfs::SimVfs::new(fs), "db", false).unwrap();
    let kv_cfg = KvConfig {
        segment_bytes: 1 << 20,
        cache_nodes: 256,
        ..KvConfig::default()
    };
    let mut db = Db::open(segs, &kv_cfg).unwrap();
    let mut model = std::collections::BTreeMap::new();
    let mut x = 7u64;
    for round in 0..40u64 {
        for _ in 0..200 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = format!("key{:05}", (x >> 33) % 2000);
            let doc = vec![(round % 251) as u8; 1000];
            db.update(key.as_bytes(), &doc).unwrap();
            model.insert(key.into_bytes(), doc);
        }
        db.commit().unwrap();
    }
    let cleaned = db.stats().segments_cleaned;
    let contents: Vec<(Vec<u8>, Vec<u8>)> = db.scan().unwrap();
    assert_eq!(
        contents,
        model.into_iter().collect::<Vec<_>>(),
        "the reference model"
    );
    let fdp = db.segments().vfs().fs().device().dev.stats().fdp.unwrap();
    let per = fdp
        .per_handle
        .iter()
        .map(|h| h.host_bytes_written)
        .collect();
    (contents, per, cleaned)
}

#[test]
fn the_cleaners_copies_go_apart_and_the_contents_stay() {
    let (on_contents, on, cleaned) = run(true);
    let (off_contents, off, cleaned_off) = run(false);
    assert_eq!(on_contents, off_contents, "same database");
    assert_eq!(cleaned, cleaned_off);
    assert!(cleaned > 0, "the run cleaned");
    assert_eq!(off[1..].iter().sum::<u64>(), 0, "{off:?}");
    assert!(on[1] > 0, "fresh nodes on SHORT's handle: {on:?}");
    assert!(on[3] > 0, "the cleaner's copies on LONG's handle: {on:?}");
    assert_eq!(on.iter().sum::<u64>(), off.iter().sum::<u64>());
}
