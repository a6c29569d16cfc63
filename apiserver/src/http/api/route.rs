//! Where a request lands: the routes the API serves.

use kubewasm_types::info::ResourceInfo;

/// Where a request lands.
pub(super) enum Route {
    Version,
    Health,
    OpenApiIndex,
    /// A document `/openapi/v3` lists, by its path there (`apis/apps/v1`).
    OpenApi(String),
    OpenApiV2,
    CoreVersions,
    Groups,
    Group(String),
    ResourceList(String, String),
    Review(Review),
    /// A `LocalSubjectAccessReview` in a namespace.
    LocalReview(String),
    /// A `Binding` created in a namespace.
    Binding(String),
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

/// The review resources served (`Route::Review`, `Route::LocalReview`):
/// group, plural, kind. All in version `v1`.
pub(super) const REVIEWS: [(&str, &str, &str); 6] = [
    (
        "authentication.k8s.io",
        "selfsubjectreviews",
        "SelfSubjectReview",
    ),
    ("authentication.k8s.io", "tokenreviews", "TokenReview"),
    (
        "authorization.k8s.io",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
    ),
    (
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
    ),
    (
        "authorization.k8s.io",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
    ),
    (
        "authorization.k8s.io",
        "subjectaccessreviews",
        "SubjectAccessReview",
    ),
];

/// The review groups, in order.
pub(super) const REVIEW_GROUPS: [&str; 2] = ["authentication.k8s.io", "authorization.k8s.io"];

/// The reviews of `group` at `version`: plural and kind.
/// Whether `plural` of `group`/`version` is a resource served by a route
/// of its own and never stored: a review, or the core group's `bindings`.
pub(super) fn served_apart(group: &str, version: &str, plural: &str) -> bool {
    reviews(group, version).any(|(p, _)| p == plural)
        || (group.is_empty() && version == "v1" && plural == "bindings")
}

pub(super) fn reviews<'a>(
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = (&'static str, &'static str)> + 'a {
    REVIEWS
        .iter()
        .filter(move |(g, ..)| *g == group && version == "v1")
        .map(|(_, plural, kind)| (*plural, *kind))
}
