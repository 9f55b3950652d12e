// Generics, a lifetime and a `where` clause, returning through an alias of `Result`.
#[rate_limit(period = "2m", threshold = 100, key = id)]
pub(crate) async fn load<'a, T, K>(cache: &'a Cache<T>, id: K) -> anyhow::Result<&'a T>
where
    T: Clone + Send + Sync,
    K: std::fmt::Display + Send,
{
    cache.get(&id.to_string()).await
}
