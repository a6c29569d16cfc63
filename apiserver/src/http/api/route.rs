//! Where a request lands: the routes the API serves.

use kubewasm_types::info::ResourceInfo;

/// Where a request lands.
pub(super) enum Route {
    Version,
    Health,
    OpenApiIndex,
    OpenApi(String, String),
    CoreVersions,
    Groups,
    Group(String),
    ResourceList(String, String),
    Review(Review),
    Resource(Box<Target>),
}

/// A request on a resource: collection or object, maybe a subresource.
pub(super) struct Target {
    pub(super) info: ResourceInfo,
    pub(super) namespace: Option<String>,
    pub(super) name: Option<String>,
    pub(super) subresource: Option<String>,
}

/// The self-reviews.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Review {
    /// `SelfSubjectAccessReview`: may I do this?
    Access,
    /// `SelfSubjectRulesReview`: what may I do in this namespace?
    Rules,
    /// `SelfSubjectReview`: who am I?
    WhoAmI,
    /// `TokenReview`: whom does this token stand for? (Needs `create
    /// tokenreviews`, as `system:auth-delegator` grants it.)
    Token,
    /// `SubjectAccessReview`: may this user, with these groups, do this?
    /// (Needs `create subjectaccessreviews`, as `system:auth-delegator`
    /// grants it.) Evaluated for exactly the user and groups named, as the
    /// real server does: a ServiceAccount's groups are not implied.
    Subject,
}
