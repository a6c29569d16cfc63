//! Pulled components cached on disk by manifest digest, and whose pull may
//! use which credentials and cached artifacts ([`Puller`], [`Receipt`]).

use kubewasm_runtime::private_dir::PrivateDir;
use oci_client::Reference;

use super::credentials::Credentials;
use super::error::OciError;
use super::registry::{Access, Pulled, digest_of, pull_layer, resolve};

/// The subdirectory of the host's private directory the artifacts are in.
const ARTIFACTS: &str = "artifacts";
/// The subdirectory of [`ARTIFACTS`] the receipts are in.
const RECEIPTS: &str = "receipts";

/// Pulled components cached on disk by manifest digest: a reference
/// pinned by digest that is cached needs no registry at all (a host
/// restarted while its registry is down still loads it).
///
/// They are kept in the host's [`PrivateDir`] (`artifacts/`, the receipts
/// in `artifacts/receipts/`): what is read back from there is trusted.
#[derive(Clone, Debug)]
pub struct Artifacts {
    dir: PrivateDir,
    access: Access,
}

impl Artifacts {
    /// Artifacts cached in `dir`'s `artifacts/` (made when first needed),
    /// fetched with `access`.
    pub fn new(dir: PrivateDir, access: Access) -> Self {
        Self { dir, access }
    }

    /// The file of `digest`'s component, in [`ARTIFACTS`].
    fn file(digest: &str) -> String {
        format!("{}.wasm", digest.replace(':', "-"))
    }

    /// The file of a receipt, in [`RECEIPTS`].
    fn receipt(receipt: Receipt, resource: &str, digest: &str) -> String {
        digest_of(format!("{receipt:?}\n{resource}\n{digest}").as_bytes()).replace(':', "-")
    }

    /// Whether the host gave `resource` (a uid) this receipt for `digest`.
    pub fn has_receipt(&self, receipt: Receipt, resource: &str, digest: &str) -> bool {
        let name = Self::receipt(receipt, resource, digest);
        self.dir.contains(&format!("{ARTIFACTS}/{RECEIPTS}/{name}"))
    }

    /// Records that the host saw `receipt` for `resource` and `digest` (a
    /// receipt not written costs only the registry being needed next time).
    pub fn give_receipt(&self, receipt: Receipt, resource: &str, digest: &str) {
        let name = Self::receipt(receipt, resource, digest);
        let written = self
            .dir
            .subdir(ARTIFACTS)
            .and_then(|artifacts| artifacts.subdir(RECEIPTS))
            .and_then(|receipts| receipts.write(&name, b""));
        if let Err(error) = written {
            tracing::warn!(dir = %self.dir.path().display(), receipt = name, %error, "receipt not kept");
        }
    }

    /// How `puller` reaches registries: with which credentials.
    pub fn access_for(&self, puller: &Puller<'_>) -> Access {
        Access {
            plain_http: self.access.plain_http,
            roots: self.access.roots.clone(),
            timeouts: self.access.timeouts,
            credentials: match puller {
                Puller::Operator(own) => self.access.credentials.overridden_by(own),
                Puller::Tenant {
                    credentials,
                    share_host: true,
                    ..
                } => self.access.credentials.overridden_by(credentials),
                Puller::Tenant { credentials, .. } => credentials.clone(),
            },
        }
    }

    /// The component at `reference` and the manifest digest it resolved
    /// to, for the operator (the plugin directory): see [`Puller::Operator`].
    ///
    /// # Errors
    /// [`OciError`] as [`pull`] says.
    pub async fn fetch(&self, reference: &Reference) -> Result<Pulled, OciError> {
        self.fetch_for(reference, &Puller::Operator(Credentials::default()))
            .await
    }

    /// The component at `reference` and the manifest digest it resolved to,
    /// for `puller` (see [`Puller`]): from the cache when it may use it,
    /// else pulled, verified and cached.
    ///
    /// # Errors
    /// [`OciError`] as [`pull`] says, and [`OciError::Deadline`] past the
    /// access's [`Timeouts::pull`](super::Timeouts::pull).
    pub async fn fetch_for(
        &self,
        reference: &Reference,
        puller: &Puller<'_>,
    ) -> Result<Pulled, OciError> {
        self.access
            .bounded(reference, self.fetch_unbounded(reference, puller))
            .await
    }

    /// [`Self::fetch_for`], however long the registry takes.
    async fn fetch_unbounded(
        &self,
        reference: &Reference,
        puller: &Puller<'_>,
    ) -> Result<Pulled, OciError> {
        let cached = |digest: &str| {
            let file = format!("{ARTIFACTS}/{}", Self::file(digest));
            self.dir.read(&file).ok().flatten().map(|bytes| Pulled {
                bytes,
                digest: digest.to_owned(),
            })
        };
        let access = self.access_for(puller);
        if let (Puller::Operator(_), Some(digest)) = (puller, reference.digest())
            && let Some(pulled) = cached(digest)
        {
            return Ok(pulled);
        }
        let resolved = match resolve(reference, &access).await {
            Ok(resolved) => resolved,
            // Unreachable (not refusing): a tenant keeps a digest its own
            // credentials resolved before.
            Err(error @ OciError::Registry { .. }) => {
                let kept = match (puller, reference.digest()) {
                    (Puller::Tenant { resource, .. }, Some(digest))
                        if error.is_unreachable()
                            && self.has_receipt(Receipt::Resolved, resource, digest) =>
                    {
                        cached(digest)
                    }
                    _ => None,
                };
                return kept.ok_or(error);
            }
            Err(error) => return Err(error),
        };
        if let Puller::Tenant { resource, .. } = puller {
            self.give_receipt(Receipt::Resolved, resource, &resolved.digest);
        }
        // Authorized for this digest: the cache saves the download.
        if let Some(pulled) = cached(&resolved.digest) {
            return Ok(pulled);
        }
        let pulled = pull_layer(reference, &access, resolved).await?;
        // A cache that cannot be written only costs a pull next time.
        let written = self
            .dir
            .subdir(ARTIFACTS)
            .and_then(|artifacts| artifacts.write(&Self::file(&pulled.digest), &pulled.bytes));
        if let Err(error) = written {
            tracing::warn!(dir = %self.dir.path().display(), %error, "artifact not cached");
        }
        Ok(pulled)
    }
}

/// Whose pull it is, and so which credentials and cached artifacts it may
/// use.
#[derive(Clone, Debug)]
pub enum Puller<'a> {
    /// The operator's (the plugin directory, a `ClusterPlugin`): these
    /// credentials, then the host's; a digest already cached needs no
    /// registry at all (a host restarted while its registry is down still
    /// loads it).
    Operator(Credentials),
    /// A tenant's (a `Plugin`): its own credentials only (the host's too
    /// when the operator shares them); a cached artifact only once those
    /// credentials resolved its digest at the registry, so the cache saves
    /// the download, never the authorization. With the registry
    /// unreachable, a digest they resolved before ([`Receipt::Resolved`])
    /// is taken from the cache.
    Tenant {
        /// Its pull secrets' credentials.
        credentials: Credentials,
        /// Whether the host's own credentials may be used too.
        share_host: bool,
        /// The resource's uid: whose receipts count.
        resource: &'a str,
    },
}

/// What the host itself saw of a resource and a digest, kept beside the
/// cache: never taken from the cluster (a tenant may write its resource's
/// status, never the host's disk), and tied to the resource's uid (a
/// resource deleted and made again starts with none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Receipt {
    /// The resource's own credentials resolved the digest at its registry.
    Resolved,
    /// The digest's signature verified with the keys the resource required.
    Verified,
}
