//! The managed servers of this process, by URL: what the report's metadata records of each
//! ([`lookup`]), and a handle a fault can crash and restart ([`server_at`]).

use super::{ManagedServer, ServerKind};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// A managed server as the report's metadata records it.
#[derive(Debug, Clone, PartialEq)]
pub struct Registered {
    pub kind: ServerKind,
    pub url: String,
    pub version: String,
    pub settings: Vec<(String, String)>,
    pub data_dir: PathBuf,
}

static REGISTRY: Mutex<Vec<Registered>> = Mutex::new(Vec::new());

pub(super) fn register(s: &ManagedServer) {
    REGISTRY
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Registered {
            kind: s.kind,
            url: s.url(),
            version: s.version.clone(),
            settings: s.settings.clone(),
            data_dir: s.data_dir.clone(),
        });
}

pub(super) fn unregister(url: &str) {
    REGISTRY
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|r| r.url != url);
}

/// The managed server of this process that `url` points at (same port on 127.0.0.1), if any.
pub fn lookup(url: &str) -> Option<Registered> {
    let port = reqwest::Url::parse(url).ok()?.port()?;
    REGISTRY
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|r| reqwest::Url::parse(&r.url).ok().and_then(|u| u.port()) == Some(port))
        .cloned()
}

static HANDLES: Mutex<Vec<std::sync::Weak<ManagedServer>>> = Mutex::new(Vec::new());

pub(super) fn remember(s: &Arc<ManagedServer>) {
    let mut h = HANDLES.lock().unwrap_or_else(|e| e.into_inner());
    h.retain(|w| w.strong_count() > 0);
    h.push(Arc::downgrade(s));
}

/// The managed server of this process that `url` points at (same port on 127.0.0.1), as a
/// handle a fault can crash and restart (`None`: not managed, or its set was dropped).
pub fn server_at(url: &str) -> Option<Arc<ManagedServer>> {
    let port = reqwest::Url::parse(url).ok()?.port()?;
    HANDLES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .find(|s| s.port == port)
}
