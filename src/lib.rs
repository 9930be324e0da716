//! lockwarden: an HTTP service that hands out named, leased, prioritised locks, with the
//! state in Apache ZooKeeper (or, by default, in memory).
//!
//! Layers, from the inside out: [`model`], [`record`] and [`scope`] (values, their stored
//! form, and what a scoped token may touch), [`engine`] (the pure lock decision), [`store`]
//! (versioned records with conditional writes), [`service`] (read, decide, write, retry),
//! and [`api`] (HTTP). [`cli`] is the binary's client
//! side, built on the `lockwarden-client` crate in `clients/rust/`. [`metrics`] is what `/metrics`
//! shows.

pub mod api;
pub mod audit;
pub mod bench;
pub mod cli;
pub mod config;
pub mod engine;
pub mod http_server;
pub mod metrics;
pub mod model;
pub mod record;
pub mod resource;
pub mod scope;
pub mod seal;
pub mod server;
pub mod service;
pub mod startup;
pub mod store;
pub mod tls;
pub mod waiter;
pub mod webhook;
