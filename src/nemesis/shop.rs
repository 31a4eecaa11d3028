//! `shop-kill`: kill -9 the run's child shop, and start it again on the same port once the
//! window is over (the runner's [`ShopControl`] knows how it was started).

use super::hold::{Hold, ShopControl};

/// Kills the shop, waits out the window, restarts it.
pub(super) async fn kill(
    shop: &dyn ShopControl,
    hold: &mut Hold,
) -> anyhow::Result<Option<String>> {
    if !hold.start().await {
        return Ok(None);
    }
    shop.kill().await?;
    hold.wait().await;
    shop.restart().await?;
    Ok(Some(
        "killed with SIGKILL, restarted on the same port".into(),
    ))
}
