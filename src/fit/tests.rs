//! Unit tests of the fit: lines read in both formats and their errors, the tally of one
//! buyer's requests, the shape fits, and a whole fit of a small hand-written log.

use super::model::{shapes, Model, Range, Shaping};
use super::parse::{BuyerSource, Fields, Format, Parsed, Reader, Request};
use super::route::{Action, Routes};
use super::tally::{After, Tally};
use super::time::Stamp;

fn reader(format: Format, buyer: BuyerSource) -> Reader {
    Reader {
        format,
        fields: Fields::default(),
        buyer,
        routes: Routes::default(),
    }
}

fn request(p: Parsed) -> Request {
    match p {
        Parsed::Request(r) => r,
        other => panic!("not a request: {other:?}"),
    }
}

#[test]
fn a_combined_line_gives_its_action_time_status_and_buyer() {
    let r = reader(Format::Combined, BuyerSource::RemoteUser);
    let line = br#"10.1.0.7 - alice [06/Dec/2026:01:05:28.250 +0000] "POST /api/orders?x=1 HTTP/1.1" 409 21 "-" "Mozilla \"quoted\" 5.0""#;
    let a = request(r.line(1, line).unwrap());
    assert_eq!(a.action, Action::Order);
    assert_eq!(a.status, 409);
    assert_eq!(
        a.at,
        Stamp {
            micros: 1_796_519_128_250_000,
            fraction: true
        }
    );
    assert!(!a.by_ip);
    // No user: the client IP, marked.
    let anon = String::from_utf8_lossy(line).replace(" alice ", " - ");
    let b = request(r.line(2, anon.as_bytes()).unwrap());
    assert!(b.by_ip);
    assert_ne!(a.buyer, b.buyer);
    // The same user from another address is the same buyer.
    let moved = String::from_utf8_lossy(line).replace("10.1.0.7", "10.9.9.9");
    assert_eq!(request(r.line(3, moved.as_bytes()).unwrap()).buyer, a.buyer);
    assert_eq!(
        r.line(4, br#"10.1.0.7 - - [06/Dec/2026:01:05:28 +0000] "GET /static/app.js HTTP/1.1" 200 9 "-" "x""#),
        Ok(Parsed::Other("GET /static/app.js".into()))
    );
    assert_eq!(r.line(5, b"   "), Ok(Parsed::Blank));
    let by_query = reader(Format::Combined, BuyerSource::Query("uid".into()));
    let q = br#"10.1.0.7 - - [06/Dec/2026:01:05:28 +0000] "POST /api/orders?uid=u-9 HTTP/1.1" 201 9 "-" "x""#;
    assert!(!request(by_query.line(6, q).unwrap()).by_ip);
}

#[test]
fn a_bad_combined_line_names_its_line_and_field() {
    let r = reader(Format::Combined, BuyerSource::RemoteUser);
    for (line, field, says) in [
        ("garbage", "remote_addr", "not the combined format"),
        (
            "1.2.3.4 - u 06/Dec/2026 \"POST /api/orders\" 201",
            "time_local",
            "no '['",
        ),
        (
            "1.2.3.4 - u [06/Dec/2026:01:05:28 +0000] POST",
            "request",
            "no '\"' before",
        ),
        (
            "1.2.3.4 - u [06/Dec/2026:01:05:28 +0000] \"POST /api/orders",
            "request",
            "no '\"' after",
        ),
        (
            "1.2.3.4 - u [06/Dec/2026:01:05:28 +0000] \"POST /api/orders\"",
            "status",
            "no status",
        ),
        (
            "1.2.3.4 - u [06/Dec/2026:01:05:28 +0000] \"POST /api/orders\" 999 1",
            "status",
            "\"999\" is not an HTTP status",
        ),
        (
            "1.2.3.4 - u [06/12/2026 01:05:28] \"POST /api/orders\" 201 1",
            "time_local",
            "$time_local",
        ),
    ] {
        let e = r.line(7, line.as_bytes()).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (7, field), "{line}: {e}");
        assert!(e.to_string().contains(says), "{line}: {e}");
    }
}

#[test]
fn a_json_line_reads_named_fields_nested_ones_numbers_and_cookies() {
    let mut r = reader(Format::Json, BuyerSource::Cookie("sid".into()));
    r.fields.time = "t.msec".into();
    let line = br#"{"t":{"msec":1796519128.5},"request_method":"POST","request_uri":"/api/orders/o-1/cancel","status":"200","remote_addr":"10.0.0.2","http_cookie":"a=1; sid=s-77"}"#;
    let c = request(r.line(1, line).unwrap());
    assert_eq!(
        (c.action, c.status, c.at.micros),
        (Action::Cancel, 200, 1_796_519_128_500_000)
    );
    assert!(!c.by_ip, "the cookie names the buyer");
    let no_cookie = String::from_utf8_lossy(line).replace("sid=s-77", "other=1");
    assert!(request(r.line(2, no_cookie.as_bytes()).unwrap()).by_ip);
    let e = r
        .line(
            3,
            br#"{"request_method":"POST","request_uri":"/api/orders","status":201}"#,
        )
        .unwrap_err();
    assert_eq!(e.field, "t.msec");
    assert!(e.problem.contains("--time-field"), "{e}");
    let e = r
        .line(
            4,
            br#"{"t":{"msec":1},"request_method":"POST","request_uri":"/api/orders","status":201}"#,
        )
        .unwrap_err();
    assert_eq!(e.field, "remote_addr", "no buyer at all: {e}");
    let e = r.line(5, b"[1, 2]").unwrap_err();
    assert!(e.problem.contains("not a JSON object"), "{e}");
    let e = r.line(6, br#"{"request_uri":"/x"}"#).unwrap_err();
    assert_eq!(e.field, "request_method");
}

#[test]
fn the_buyer_flag_reads_each_source_and_refuses_what_a_format_cannot_hold() {
    let ok = |v, f| BuyerSource::parse(v, f).unwrap();
    assert_eq!(ok("remote_user", Format::Combined), BuyerSource::RemoteUser);
    assert_eq!(ok("remote_addr", Format::Combined), BuyerSource::ClientIp);
    assert_eq!(
        ok("query:uid", Format::Combined),
        BuyerSource::Query("uid".into())
    );
    assert_eq!(
        ok("user.id", Format::Json),
        BuyerSource::Field("user.id".into())
    );
    assert_eq!(
        ok("cookie:sid", Format::Json),
        BuyerSource::Cookie("sid".into())
    );
    for (v, f, says) in [
        ("cookie:sid", Format::Combined, "logs no cookies"),
        ("uid", Format::Combined, "--format json"),
        ("query:", Format::Json, "NAME"),
        ("", Format::Json, "empty"),
    ] {
        let e = BuyerSource::parse(v, f).unwrap_err();
        assert!(e.contains(says), "{v}: {e}");
    }
}

fn req(action: Action, ms: i64, status: u16, buyer: u64) -> Request {
    Request {
        action,
        at: Stamp {
            micros: ms * 1000,
            fraction: true,
        },
        status,
        buyer,
        by_ip: false,
    }
}

#[test]
fn the_tally_measures_views_thinks_bots_follow_ups_and_the_units_held() {
    let mut t = Tally::new(1_000 * 1000, None, 2_000_000);
    use Action::*;
    for r in [
        req(View, 500, 200, 1), // before the start: left out
        req(View, 1_000, 200, 1),
        req(View, 2_000, 200, 1),
        req(Order, 2_500, 201, 1),
        req(Pay, 7_500, 200, 1),
        req(Order, 3_000, 201, 2), // a bot: 4 attempts 300 ms apart
        req(Order, 3_300, 409, 2),
        req(Order, 3_600, 409, 2),
        req(Order, 3_900, 409, 2),
        req(Cancel, 4_900, 200, 2),
        req(Order, 5_000, 201, 3),
        req(Order, 9_000, 409, 3), // 4 s later: not a resubmit
        req(Pay, 9_100, 200, 4),   // no order of its own: stray
        req(View, 9_200, 200, 5),  // only viewed
    ] {
        t.add(&r);
    }
    assert_eq!(t.before_start, 1);
    let b1 = t.buyers[&1];
    assert_eq!((b1.views, b1.attempts, b1.after), (2, 1, After::Paid));
    assert_eq!(b1.first, 1_000_000);
    assert_eq!(t.buyers[&2].resubmits, 3);
    assert_eq!(t.buyers[&3].resubmits, 0);
    assert_eq!(t.stray_follow_ups, 1);
    assert_eq!(
        t.only_viewed(),
        2,
        "buyer 4 (a stray pay) and buyer 5 never ordered"
    );
    assert_eq!(t.view_think.len(), 2);
    let max_is = |h: &super::tally::Gaps, ms: u64| h.equivalent(h.max(), ms);
    assert!(
        max_is(&t.view_think, 1000),
        "view to view 1000 ms, view to order 500 ms"
    );
    assert!(max_is(&t.view_think, 1000) && t.view_think.equivalent(t.view_think.min(), 500));
    assert_eq!(t.bot_gaps.len(), 3);
    assert!(max_is(&t.bot_gaps, 300));
    assert!(max_is(&t.pay_delay, 5000), "from the last order attempt");
    assert!(max_is(&t.cancel_delay, 1000), "from the bot's last attempt");
    assert_eq!(
        t.held_peak, 2,
        "two acknowledged, one cancelled, then the third"
    );
    let m = Model::fit(
        &t,
        Shaping {
            scale: 1.0,
            compress: 1.0,
            stock: None,
        },
    );
    assert_eq!((m.log_buyers, m.bots, m.people, m.viewers), (3, 1, 2, 1));
    assert_eq!((m.ordered, m.paid, m.cancelled), (3, 1, 1));
    assert_eq!(m.after_bp(), [3333, 3333, 3334]);
    assert_eq!(
        m.log_trace,
        vec![1, 0, 1, 0, 1],
        "first requests 0, 2 and 4 s after the start"
    );
}

#[test]
fn a_quantile_range_is_the_uniform_draw_with_the_same_deciles() {
    let mut h = hdrhistogram::Histogram::<u64>::new_with_max(100_000, 3).unwrap();
    for v in 1000..=3000 {
        h.record(v).unwrap();
    }
    let r = Range::of(&h, 600_000).unwrap();
    assert!(
        (r.lo as i64 - 1000).abs() <= 10 && (r.hi as i64 - 3000).abs() <= 10,
        "{r:?}"
    );
    let cut = Range::of(&h, 2000).unwrap();
    assert!(cut.clamped && cut.hi == 2000, "{cut:?}");
}

#[test]
fn the_closest_burst_finds_the_rush_and_a_flat_curve_fits_uniform() {
    let mut trace = vec![700u32, 700, 700];
    trace.extend(std::iter::repeat_n(30, 30));
    let (b, uniform) = shapes(&trace);
    assert_eq!(b.burst_s, 3.0);
    assert!((b.share - 0.7).abs() < 1e-9, "{b:?}");
    assert!(b.distance < 0.01 && uniform > 0.5, "{b:?} {uniform}");
    let (_, flat) = shapes(&[50; 20]);
    assert!(flat < 1e-9);
}
