// The expansion of the fixture beside this file, pretty-printed; regenerate with
// `RATELIMIT_BLESS=1 cargo test -p ratelimit-macros snapshots` and review the diff.

async fn report() -> Result<(), my_app::Error> {
    {
        fn __ratelimit() {}
        my_app::deps::ratelimit::__private::inventory::submit! {
            my_app::deps::ratelimit::__private::Declaration { name :
            ::core::option::Option::None, function : { fn __ratelimit_scope() -> &
            'static ::core::primitive::str {
            my_app::deps::ratelimit::__private::scope_from_item_path(my_app::deps::ratelimit::__private::type_name_of(&
            __ratelimit),) } __ratelimit_scope }, position :
            ::core::option::Option::None, rate : ::core::option::Option::Some(const {
            my_app::deps::ratelimit::Rate::new_const(1000,
            my_app::deps::ratelimit::__private::Duration::from_micros(3600000000),) }),
            cost : ::core::option::Option::Some(1), file : ::core::file!(), line :
            ::core::line!(), }
        }
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
