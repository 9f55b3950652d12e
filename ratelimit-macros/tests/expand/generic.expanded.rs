// The expansion of the fixture beside this file, pretty-printed; regenerate with
// `RATELIMIT_BLESS=1 cargo test -p ratelimit-macros snapshots` and review the diff.

pub(crate) async fn load<'a, T, K>(cache: &'a Cache<T>, id: K) -> anyhow::Result<&'a T>
where
    T: Clone + Send + Sync,
    K: std::fmt::Display + Send,
{
    {
        fn __ratelimit() {}
        let __ratelimit: &'static ::core::primitive::str = {
            static __RATELIMIT_SCOPE: ::ratelimit_runtime::__private::Scope = ::ratelimit_runtime::__private::Scope::new();
            __RATELIMIT_SCOPE.of(&__ratelimit)
        };
        let __ratelimit = (
            __ratelimit,
            ::core::option::Option::Some(
                ::ratelimit_runtime::__private::scoped_key(__ratelimit, &(id)),
            ),
        );
        if let ::core::result::Result::Err(__ratelimit) = ::ratelimit_runtime::__private::check(
                ::ratelimit_runtime::__private::global(),
                __ratelimit,
                const {
                    ::ratelimit_runtime::Rate::new_const(
                        100,
                        ::ratelimit_runtime::__private::Duration::from_micros(120000000),
                    )
                },
            )
            .await
        {
            return ::ratelimit_runtime::__private::denied(__ratelimit);
        }
    }
    { cache.get(&id.to_string()).await }
}
