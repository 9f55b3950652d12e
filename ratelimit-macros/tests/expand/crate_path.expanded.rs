// The expansion of the fixture beside this file, pretty-printed; regenerate with
// `RATELIMIT_BLESS=1 cargo test -p ratelimit-macros snapshots` and review the diff.

async fn report() -> Result<(), my_app::Error> {
    {
        fn __ratelimit() {}
        let __ratelimit: &'static ::core::primitive::str = my_app::deps::ratelimit::__private::scope_from_item_path(
            my_app::deps::ratelimit::__private::type_name_of(&__ratelimit),
        );
        let __ratelimit = (__ratelimit, ::core::option::Option::None);
        if let ::core::result::Result::Err(__ratelimit) = my_app::deps::ratelimit::__private::check(
                my_app::deps::ratelimit::__private::global(),
                __ratelimit.0,
                __ratelimit.1,
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
