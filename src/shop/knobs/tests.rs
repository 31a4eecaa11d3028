use super::*;
use clap::{CommandFactory, Parser};

#[derive(Parser)]
struct Serve {
    #[command(flatten)]
    knobs: ShopKnobs,
}

fn parse(args: &[String]) -> ShopKnobs {
    try_parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn try_parse(args: &[String]) -> Result<ShopKnobs, String> {
    Serve::try_parse_from(std::iter::once("serve".to_string()).chain(args.iter().cloned()))
        .map(|s| s.knobs)
        .map_err(|e| e.to_string())
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn the_flags_defaults_are_the_types_defaults() {
    assert_eq!(parse(&[]), ShopKnobs::default());
}

#[test]
fn the_command_line_reproduces_every_knob() {
    let knobs = ShopKnobs {
        pool_size: 7,
        naive_gap: ms(15),
        work: Duration::from_micros(1500),
        payment_timeout: Duration::from_secs(2),
        reconcile_alert_threshold: 4,
        ip_burst: 2.5,
        rate_limit: 100.0,
        page_cache: Duration::ZERO,
        redis_durability: Durability::AofEverysec,
        redis_cluster: true,
        ..ShopKnobs::default()
    };
    let args = knobs.command_line();
    assert!(args.iter().any(|a| a == "--redis-cluster"), "{args:?}");
    assert!(!ShopKnobs::default()
        .command_line()
        .iter()
        .any(|a| a == "--redis-cluster"));
    for pair in [
        ["--ip-burst", "2.5"],
        ["--redis-durability", "aof-everysec"],
        ["--naive-gap", "15ms"],
        ["--payment-timeout", "2s"],
        ["--page-cache", "0s"],
    ] {
        assert!(args.windows(2).any(|w| w == pair), "{pair:?} in {args:?}");
    }
    assert!(
        !args.iter().any(|a| a.ends_with("-ms") || a.ends_with("-s")),
        "only the new spellings: {args:?}"
    );
    assert_eq!(parse(&args), knobs);
    assert_eq!(
        parse(&ShopKnobs::default().command_line()),
        ShopKnobs::default()
    );
}

#[test]
fn a_duration_flag_takes_a_unit_and_its_old_hidden_spelling_its_old_unit() {
    let new = parse(&args(&[
        "--acquire-timeout",
        "250ms",
        "--payment-timeout",
        "15m",
    ]));
    assert_eq!(new.acquire_timeout, ms(250));
    assert_eq!(new.payment_timeout, Duration::from_secs(900));
    let old = parse(&args(&[
        "--acquire-timeout-ms",
        "250",
        "--payment-timeout-s",
        "900",
    ]));
    assert_eq!(old, new, "the old spelling means the same");
    assert_eq!(parse(&args(&["--work", "0s"])).work, Duration::ZERO);
    let e = try_parse(&args(&["--work", "5"])).unwrap_err();
    assert!(e.contains("--work") && e.contains("5s or 5ms"), "{e}");
    let e = try_parse(&args(&["--work", "5ms", "--work-ms", "5"])).unwrap_err();
    assert!(
        e.contains("--work <DURATION>") && e.contains("--work-ms <MS>"),
        "both spellings named: {e}"
    );
    let e = try_parse(&args(&["--work-ms", "5ms"])).unwrap_err();
    assert!(
        e.contains("--work-ms"),
        "the old flag keeps its bare number: {e}"
    );
}

#[test]
fn help_lists_the_new_duration_flags_and_hides_the_old() {
    let help = Serve::command().render_long_help().to_string();
    for (new, old) in ShopKnobs::OLD_KEYS {
        let (new, old) = (new.replace('_', "-"), old.replace('_', "-"));
        assert!(
            help.contains(&format!("--{new} <DURATION>")),
            "{new}: {help}"
        );
        assert!(!help.contains(&format!("--{old}")), "{old}: {help}");
    }
    assert!(
        help.contains("[default: 15m]"),
        "payment-timeout's default: {help}"
    );
    assert!(
        help.contains("[default: 500ms]"),
        "acquire-timeout's default: {help}"
    );
}

#[test]
fn a_shop_table_is_an_overlay_on_the_defaults() {
    let k: ShopKnobs = toml::from_str("work_ms = 9\nip_burst = 3.0").unwrap();
    assert_eq!(
        k,
        ShopKnobs {
            work: ms(9),
            ip_burst: 3.0,
            ..ShopKnobs::default()
        }
    );
    let e = toml::from_str::<ShopKnobs>("wrok_ms = 9")
        .unwrap_err()
        .to_string();
    assert!(e.contains("wrok_ms") && e.contains("work_ms"), "{e}");
    let k: ShopKnobs = serde_json::from_str(r#"{"pool_size": 4, "work_ms": null}"#).unwrap();
    assert_eq!((k.pool_size, k.work), (4, ms(1)));
    let k: ShopKnobs = toml::from_str("redis_cluster = true").unwrap();
    assert!(k.redis_cluster);
    let k: ShopKnobs = toml::from_str("redis_durability = \"wait-replica\"").unwrap();
    assert_eq!(k.redis_durability, Durability::WaitReplica);
    let e = toml::from_str::<ShopKnobs>("redis_durability = \"fsync\"")
        .unwrap_err()
        .to_string();
    assert!(e.contains("aof-always"), "{e}");
}

#[test]
fn a_shop_table_takes_the_new_key_with_a_unit_or_the_old_key_and_not_both() {
    let new: ShopKnobs =
        toml::from_str("acquire_timeout = \"300ms\"\npayment_timeout = \"2s\"").unwrap();
    let old: ShopKnobs = toml::from_str("acquire_timeout_ms = 300\npayment_timeout_s = 2").unwrap();
    assert_eq!(new, old);
    assert_eq!(
        (new.acquire_timeout, new.payment_timeout),
        (ms(300), Duration::from_secs(2))
    );
    let e = toml::from_str::<ShopKnobs>("work = \"2ms\"\nwork_ms = 2")
        .unwrap_err()
        .to_string();
    assert!(e.contains("`work`") && e.contains("`work_ms`"), "{e}");
    let e = toml::from_str::<ShopKnobs>("work = 2")
        .unwrap_err()
        .to_string();
    assert!(e.contains("no unit") && e.contains("\"2ms\""), "{e}");
    let e = toml::from_str::<ShopKnobs>("work = \"soon\"")
        .unwrap_err()
        .to_string();
    assert!(e.contains("soon"), "{e}");
    let e = toml::from_str::<ShopKnobs>("work_ms = -1")
        .unwrap_err()
        .to_string();
    assert!(e.contains("work_ms"), "{e}");
}

#[test]
fn report_json_keeps_the_old_keys_in_their_units_and_reads_back_the_same() {
    let k = ShopKnobs {
        acquire_timeout: ms(300),
        payment_timeout: Duration::from_millis(1500),
        ..ShopKnobs::default()
    };
    let json = serde_json::to_value(&k).unwrap();
    assert_eq!(json["acquire_timeout_ms"], serde_json::json!(300));
    assert_eq!(json["payment_timeout_s"], serde_json::json!(1.5));
    assert_eq!(
        json["work_ms"],
        serde_json::json!(1),
        "a whole number stays an integer"
    );
    assert!(json.get("acquire_timeout").is_none(), "{json}");
    assert_eq!(serde_json::from_value::<ShopKnobs>(json).unwrap(), k);
    let toml_text = toml::to_string(&k).unwrap();
    assert_eq!(toml::from_str::<ShopKnobs>(&toml_text).unwrap(), k);
}

#[test]
fn a_defect_is_absent_unless_asked_and_reaches_the_shops_command_line() {
    assert_eq!(ShopKnobs::default().defect, None);
    assert!(!ShopKnobs::default()
        .command_line()
        .iter()
        .any(|a| a == "--defect"));
    let k: ShopKnobs = toml::from_str("defect = \"limit-race\"").unwrap();
    assert_eq!(k.defect, Some(Defect::LimitRace));
    let args = k.command_line();
    assert!(
        args.windows(2).any(|w| w == ["--defect", "limit-race"]),
        "{args:?}"
    );
    assert_eq!(parse(&args), k);
    assert!(k.check_defect(Strategy::Conditional).is_ok());
    assert!(k.check_defect(Strategy::RedisLua).is_err());
    let e = toml::from_str::<ShopKnobs>("defect = \"typo\"")
        .unwrap_err()
        .to_string();
    assert!(e.contains("key-reuse"), "{e}");
}

#[test]
fn shops_is_the_runners_knob_never_a_shop_flag() {
    let knobs: ShopKnobs = toml::from_str("shops = 3").unwrap();
    assert_eq!(knobs.shops, 3);
    assert!(!knobs.command_line().iter().any(|a| a.contains("shops")));
    assert_eq!(
        parse(&knobs.command_line()).shops,
        1,
        "serve has no --shops"
    );
    let zero = ShopKnobs {
        shops: 0,
        ..ShopKnobs::default()
    };
    assert_eq!(
        zero.validate().unwrap_err().to_string(),
        format!("--shops must be between 1 and {MAX_SHOPS} (got 0)")
    );
}

#[test]
fn a_knob_out_of_range_names_its_flag_and_the_range() {
    let k = ShopKnobs {
        pool_size: 0,
        ..ShopKnobs::default()
    };
    let e = k.validate().unwrap_err();
    assert_eq!(e.knob, "pool_size");
    assert_eq!(
        e.to_string(),
        "--pool-size must be between 1 and 1000 (got 0)"
    );
    let k = ShopKnobs {
        ip_rate_limit: f64::NAN,
        ..ShopKnobs::default()
    };
    assert_eq!(k.validate().unwrap_err().knob, "ip_rate_limit");
    assert_eq!(ShopKnobs::default().validate(), Ok(()));
}

#[test]
fn a_duration_out_of_range_names_the_new_flag_and_the_range_in_units() {
    let e = parse(&args(&["--acquire-timeout-ms", "0"]))
        .validate()
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "--acquire-timeout must be between 1ms and 10m (got 0s)"
    );
    assert_eq!(
        e.field(),
        "`shop.acquire_timeout` (or `acquire_timeout_ms`)"
    );
    let e = ShopKnobs {
        payment_timeout: Duration::from_secs(8 * 24 * 3600),
        ..ShopKnobs::default()
    }
    .validate()
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "--payment-timeout must be between 1s and 7days (got 8days)"
    );
}

#[test]
fn some_knobs_are_another_commands_flags_with_its_defaults() {
    let defaults = ShopKnobs {
        pool_size: 64,
        ..ShopKnobs::default()
    };
    let names = ["pool_size", "work", "redis_cluster", "no_such_knob"];
    let cmd = clap::Command::new("bench").args(defaults.flags_of(&names));
    let ids: Vec<String> = cmd
        .get_arguments()
        .map(|a| a.get_id().to_string())
        .collect();
    assert_eq!(ids, ["pool_size", "work", "redis_cluster"]);
    let read = |a: &[&str]| {
        let m = cmd
            .clone()
            .try_get_matches_from(std::iter::once("bench").chain(a.iter().copied()))
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(defaults.clone().with_flags(&m))
    };
    assert_eq!(read(&[]).unwrap(), defaults, "the other command's defaults");
    let k = read(&["--pool-size", "8", "--work", "5ms", "--redis-cluster"]).unwrap();
    assert_eq!((k.pool_size, k.work, k.redis_cluster), (8, ms(5), true));
    assert_eq!(
        k.consumers, defaults.consumers,
        "a knob it has no flag for is kept"
    );
    let e = read(&["--pool-size", "0"]).unwrap().validate().unwrap_err();
    assert_eq!(
        e.to_string(),
        "--pool-size must be between 1 and 1000 (got 0)"
    );
    assert!(
        read(&["--work", "5"]).unwrap_err().contains("5ms"),
        "serve's parser"
    );
    assert!(
        read(&["--consumers", "3"]).is_err(),
        "only the knobs asked for"
    );
}
