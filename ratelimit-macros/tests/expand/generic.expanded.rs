// The expansion of the fixture beside this file, pretty-printed; regenerate with
// `RATELIMIT_BLESS=1 cargo test -p ratelimit-macros snapshots` and review the diff.

pub(crate) async fn load<'a, T, K>(cache: &'a Cache<T>, id: K) -> anyhow::Result<&'a T>
where
    T: Clone + Send + Sync,
    K: std::fmt::Display + Send,
{
    {
        fn __ratelimit() {}
        ::ratelimit_runtime::__private::inventory::submit! {
            ::ratelimit_runtime::__private::Declaration { name :
            ::core::option::Option::None, function : { fn __ratelimit_scope() -> &
            'static ::core::primitive::str {
            ::ratelimit_runtime::__private::scope_from_item_path(::ratelimit_runtime::__private::type_name_of(&
            __ratelimit),) } __ratelimit_scope }, position :
            ::core::option::Option::None, rate : ::core::option::Option::Some(const {
            ::ratelimit_runtime::Rate::new_const(100,
            ::ratelimit_runtime::__private::Duration::from_micros(120000000),) }), cost :
            ::core::option::Option::Some(1), file : ::core::file!(), line :
            ::core::line!(), }
        }
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
