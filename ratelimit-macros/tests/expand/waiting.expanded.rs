// The expansion of the fixture beside this file, pretty-printed; regenerate with
// `RATELIMIT_BLESS=1 cargo test -p ratelimit-macros snapshots` and review the diff.

async fn fetch(host: &str) -> Result<Page, AppError> {
    {
        fn __ratelimit() {}
        let __ratelimit: &'static ::core::primitive::str = {
            static __RATELIMIT_SCOPE: ::ratelimit_runtime::__private::Scope = ::ratelimit_runtime::__private::Scope::new();
            __RATELIMIT_SCOPE.of(&__ratelimit)
        };
        let __ratelimit = (
            __ratelimit,
            ::core::option::Option::Some(
                ::ratelimit_runtime::__private::scoped_key(__ratelimit, &(host)),
            ),
        );
        if let ::core::result::Result::Err(__ratelimit) = ::ratelimit_runtime::__private::check_waiting(
                ::ratelimit_runtime::__private::global(),
                __ratelimit,
                const {
                    ::ratelimit_runtime::Rate::new_const(
                        10,
                        ::ratelimit_runtime::__private::Duration::from_micros(1000000),
                    )
                },
                ::ratelimit_runtime::__private::Duration::from_micros(30000000),
            )
            .await
        {
            return ::ratelimit_runtime::__private::denied(__ratelimit);
        }
    }
    { get(host).await }
}
