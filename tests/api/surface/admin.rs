//! The shop's admin routes on loopback took cross-origin requests (#58): a text/plain POST to
//! `/rewarm` or `/reconcile` with no token got 200 and changed the state; the `Host` check
//! stops DNS rebinding, not a page of another origin posting to 127.0.0.1. Without a token an
//! admin route now takes a same-origin JSON request only.

use crate::helpers::*;
use oversell::testing::inventory::redis_lua::ItemKeys;
use oversell::testing::inventory::Strategy;
use oversell::testing::store::Backend;
use redis::AsyncCommands;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_another_origin_cannot_rewarm_or_reconcile_a_shop_without_a_token() {
    // Arrange: a redis-lua sale whose Redis keys are lost, so a rewarm would show.
    let mut config = test_config(Strategy::RedisLua, Backend::Postgres);
    config.rewarm_check = None;
    let app = spawn_with(config).await;
    app.setup_sale(1, 20, 1).await;
    delete_prefix(&app.redis_prefix).await;
    let keys = ItemKeys::new(&app.redis_prefix, 1);
    let mut conn = redis_conn().await;
    let own_origin = app.address.clone();
    // (content type, Origin, Sec-Fetch-Site): what a page of another origin can send.
    let attempts = [
        ("text/plain", None, None),
        (
            "application/x-www-form-urlencoded",
            Some("http://evil.example"),
            Some("cross-site"),
        ),
        ("multipart/form-data; boundary=x", None, None),
        ("application/json", Some("http://evil.example"), None),
        ("application/json", None, Some("cross-site")),
    ];

    for route in ["rewarm", "reconcile"] {
        for (ct, origin, site) in attempts {
            // Act
            let mut req = app
                .client
                .post(format!("{}/api/items/1/{route}", app.address))
                .header("content-type", ct)
                .body("x=1");
            if let Some(o) = origin {
                req = req.header("origin", o);
            }
            if let Some(s) = site {
                req = req.header("sec-fetch-site", s);
            }
            let r = req.send().await.unwrap();

            // Assert: refused, and Redis still lost the sale (nothing was rebuilt).
            let status = r.status().as_u16();
            let body = r.text().await.unwrap();
            let what = (ct, origin, site);
            assert!(
                matches!(status, 403 | 415),
                "{route}, {what:?}: {status} {body}"
            );
            let stock: Option<i64> = conn.get(&keys.stock).await.unwrap();
            assert_eq!(stock, None, "{route}, {what:?} changed the state");
        }
    }

    // The shop's own origin (or a client that is not a browser) sending JSON still works.
    let r = app
        .client
        .post(format!("{}/api/items/1/rewarm", app.address))
        .header("content-type", "application/json")
        .header("origin", own_origin.as_str())
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
    let stock: Option<i64> = conn.get(&keys.stock).await.unwrap();
    assert_eq!(stock, Some(20), "rebuilt by the same-origin JSON request");
    app.teardown().await;
}
