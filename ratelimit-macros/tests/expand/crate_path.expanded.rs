// The expansion of the fixture beside this file, pretty-printed; regenerate with
// `RATELIMIT_BLESS=1 cargo test -p ratelimit-macros snapshots` and review the diff.

async fn report() -> Result<(), my_app::Error> {
    {
        fn __ratelimit() {}
        let __ratelimit: &'static ::core::primitive::str = {
            static __RATELIMIT_SCOPE: my_app::deps::ratelimit::__private::Scope = my_app::deps::ratelimit::__private::Scope::new();
            __RATELIMIT_SCOPE.of(&__ratelimit)
        };
        let __ratelimit = (__ratelimit, ::core::option::Option::None);
        if let ::core::result::Result::Err(__ratelimit) = my_app::deps::ratelimit::__private::check(
                my_app::deps::ratelimit::__private::global(),
                __ratelimit,
                const {
                    my_app::deps::ratelimit::Rate::new_const(
                        1000,
                        my_app::deps::ratelimit::__private::Duration::from_micros(
                            3600000000,
                        ),
                    )
                },
            )
            .await
        {
            return my_app::deps::ratelimit::__private::denied(__ratelimit);
        }
    }
    { Ok(()) }
}
